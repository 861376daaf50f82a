"""The flags of the commands that run the AutoNuggetizer's prompts through a chat model
(``exam-nuggets assign``, ``exam-genq nuggetize``), so both take the same ones: their
back ends and script, and the shared model flags of :mod:`._model_flags`."""

from __future__ import annotations

import click

from ..backends import registry
from ..backends.chat import get_chat_model
from ..backends.context_limit import too_long_line
from ..backends.factory import split_backend_options
from ..backends.registry import client_class
from ..errors import UsageError
from ..grading.cache import GradeCache, NullCache
from ._base import refuse_untaken
from ._model_flags import (NUGGETIZER_REFUSES_TEMPERATURE, SERVER_OPTIONS, cache_option, flag_block, max_tokens_option,
                           no_cache_option, retries_option, temperature_option)
from ._session import cache_file


def chat_options(f):
    return cache_options(flag_block(
        click.option("--backend", default="endpoint", show_default=True, metavar="NAME",
                     help=f"{', '.join(registry.names('chat'))}: endpoint (OpenAI-compatible HTTP: OpenAI, vLLM, "
                          "TGI), hf-causal (local chat model), scripted (canned answers from --script)."),
        click.option("--model", default=None,
                     help="Model name (endpoint) or Hugging Face id / path / .gguf file (hf-causal)."),
        click.option("--script", default=None, metavar="FILE",
                     help="--backend scripted: JSONL rules {\"match\": [strings], \"output\": text}."),
        *SERVER_OPTIONS,
        retries_option(),
        max_tokens_option(),
        temperature_option(refused=NUGGETIZER_REFUSES_TEMPERATURE),
        click.option("--backend-option", "-O", "backend_options", multiple=True, metavar="KEY=VALUE",
                     help="hf-causal: further back-end option (repeatable), as in exam-grade; endpoint: "
                          "reasoning_effort=low, chat_template_kwargs='{\"enable_thinking\": false}' (sent as they are)."),
    )(f))


def cache_options(f):
    """--cache / --no-cache of the commands that keep model answers in the grade cache."""
    return flag_block(cache_option, no_cache_option)(f)


#: the chat flags a chat model's class may take (by its keyword of the same name)
CHAT_KEYWORDS = ("base_url", "api_key_env", "concurrency", "max_retries", "timeout", "max_tokens", "cache_any_server")


def make_chat(backend, model, base_url, api_key_env, concurrency, max_retries, timeout, max_tokens, backend_options,
              script=None, cache_any_server=None):
    """The chat model of the flags; checks them, loads nothing."""
    if backend_options and not registry.has(backend, "chat-options"):
        raise UsageError(f"--backend-option is for --backend {registry.listed(registry.names('chat', 'chat-options'))}")
    if script and not registry.has(backend, "script"):
        raise UsageError(f"--script is for --backend {registry.listed(registry.names('chat', 'script'))}")

    refuse_untaken(click.get_current_context(silent=True), backend, client_class(backend, "chat"), CHAT_KEYWORDS)
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
    path = cache_file(cache_path, no_cache)
    return NullCache() if path is None else GradeCache(path)


def chat_too_long(model, prompt_fix: str | None, max_tokens: int, no_cache: bool) -> str | None:
    """A chat command's one line for a run the server stopped at a prompt too long for the
    model (backends.context_limit.too_long_line), with what the cache kept."""
    kept = ("nothing was kept (--no-cache)" if no_cache
            else "the answers received are cached (a rerun with the same flags takes them from there)")
    return too_long_line(model, prompt_fix, "--max-tokens", max_tokens, kept)
