"""The flags of the commands that run the AutoNuggetizer's prompts through a chat model
(``exam-nuggets assign``, ``exam-genq nuggetize``), so both take the same ones."""

from __future__ import annotations

import click

from ..backends.endpoint import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT
from ..errors import UsageError
from ._base import FiniteRange, check_no_cache, claim_cache, refuse_untaken


#: --cache-any-server, one flag in every command that talks to a model
cache_any_server_option = click.option(
    "--cache-any-server", "cache_any_server", is_flag=True, default=None,
    help="endpoint: reuse cached grades and answers of this model from any server (base URL), as for several hosts "
         "serving the same weights; by default only the server that gave them (another may serve other weights under "
         "the same model name).")


def chat_options(f):
    opts = [
        click.option("--backend", default="endpoint", show_default=True, metavar="NAME",
                     help="endpoint (OpenAI-compatible HTTP: OpenAI, vLLM, TGI), hf-causal (local chat model) "
                          "or scripted (canned answers from --script)."),
        click.option("--model", default=None,
                     help="Model name (endpoint) or Hugging Face id / path / .gguf file (hf-causal)."),
        click.option("--script", default=None, metavar="FILE",
                     help="--backend scripted: JSONL rules {\"match\": [strings], \"output\": text}."),
        click.option("--base-url", envvar="OPENAI_BASE_URL", default=None,
                     help="Endpoint base URL including /v1 [$OPENAI_BASE_URL]."),
        click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True, metavar="VAR",
                     help="Environment variable holding the API key (never taken on the command line)."),
        click.option("--concurrency", type=click.IntRange(1), default=DEFAULT_CONCURRENCY, show_default=True,
                     help="endpoint: requests in flight (see man exam-nuggets, THROUGHPUT)."),
        click.option("--max-retries", type=click.IntRange(0), default=5, show_default=True,
                     help="HTTP retries per call on 429, 5xx, timeouts, connection errors."),
        click.option("--timeout", type=FiniteRange(min=0.1, max=86400), default=DEFAULT_TIMEOUT, show_default=True,
                     help="Seconds per HTTP request (a server that serves one request at a time answers the "
                          "last of a window late)."),
        click.option("--retries", type=click.IntRange(0), default=5, show_default=True,
                     help="Ask again (at temperature 0.2, as the nuggetizer does) this many times when an "
                          "answer does not parse; the nuggetizer's own bound is 500."),
        click.option("--max-tokens", type=click.IntRange(1), default=2048, show_default=True,
                     help="Tokens the model may write per answer (the nuggetizer's 2048)."),
        cache_any_server_option,
        click.option("--backend-option", "-O", "backend_options", multiple=True, metavar="KEY=VALUE",
                     help="hf-causal: further back-end option (repeatable), as in exam-grade; endpoint: "
                          "reasoning_effort=low, chat_template_kwargs='{\"enable_thinking\": false}' (sent as they are)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return cache_options(f)


def cache_options(f):
    """--cache / --no-cache of the commands that keep model answers in the grade cache."""
    f = click.option("--no-cache", is_flag=True, callback=check_no_cache, help="Neither read nor write the cache.")(f)
    return click.option("--cache", "cache_path", default=None, metavar="FILE", callback=claim_cache,
                        help="Answer cache (sqlite) [$EXAM_EVAL_CACHE or ~/.cache/exam_eval/grades.sqlite].")(f)


#: the chat flags a chat model's class may take (by its keyword of the same name)
CHAT_KEYWORDS = ("base_url", "api_key_env", "concurrency", "max_retries", "timeout", "max_tokens", "cache_any_server")


def make_chat(backend, model, base_url, api_key_env, concurrency, max_retries, timeout, max_tokens, backend_options,
              script=None, cache_any_server=None):
    """The chat model of the flags; checks them, loads nothing."""
    from ..backends.chat import get_chat_model
    from ..backends.factory import split_backend_options

    if backend_options and backend not in ("hf-causal", "endpoint"):
        raise UsageError("--backend-option is for --backend hf-causal and endpoint")
    if script and backend != "scripted":
        raise UsageError("--script is for --backend scripted")
    from ..backends.chat import CHAT_MODELS

    if backend in CHAT_MODELS:
        refuse_untaken(click.get_current_context(silent=True), backend, CHAT_MODELS[backend], CHAT_KEYWORDS)
    return get_chat_model(backend, model=model, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
                          max_retries=max_retries, timeout=timeout, max_tokens=max_tokens,
                          backend_options=split_backend_options(backend_options), script=script,
                          **({"cache_any_server": True} if cache_any_server else {}))


def usage_note(model) -> str | None:
    """The tokens a server reported for this run's calls (None: no call went to a server)."""
    usage = getattr(model, "usage", None)
    return usage.line() if usage else None


def kept_hint(no_cache: bool) -> str:
    """What an interrupted chat command says of the answers that came."""
    if no_cache:
        return "nothing kept (--no-cache): a rerun asks again"
    return "the answers that came are cached: run the same command again to go on"


def open_cache(cache_path, no_cache):
    from ..grading.cache import GradeCache, NullCache
    from ._session import cache_file

    path = cache_file(cache_path, no_cache)
    return NullCache() if path is None else GradeCache(path)


def chat_too_long(model, prompt_fix: str | None, max_tokens: int, no_cache: bool) -> str | None:
    """A chat command's one line for a run the server stopped at a prompt too long for the
    model (backends.context_limit.too_long_line), with what the cache kept."""
    from ..backends.context_limit import too_long_line

    kept = ("nothing was kept (--no-cache)" if no_cache
            else "the answers received are cached (a rerun with the same flags takes them from there)")
    return too_long_line(model, prompt_fix, "--max-tokens", max_tokens, kept)
