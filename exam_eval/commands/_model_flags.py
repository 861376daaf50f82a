"""The flags of the commands that talk to a model (exam-grade and exam-nuggets support,
exam-nuggets assign, exam-genq generate and nuggetize), declared once: one name, one
default and one help text wherever the meaning is the same, and where it differs by the
role the command asks of its back end (registry.ROLES: score, chat, complete), one
declaration with its text for each role (:func:`role_option`). A flag a command cannot
honour is still declared there, and refused in one line naming the flag and why
(``refused``), so that a flag learnt in one command never means nothing in another.

Why the defaults are what they are is said in man exam_eval(7), MODEL FLAGS."""

from __future__ import annotations

import click

from ..backends import registry
from ..backends.chat import NUGGETIZER_MAX_TOKENS
from ..backends.endpoint import DEFAULT_CONCURRENCY
from ..backends.http_client import DEFAULT_TIMEOUT
from ..errors import UsageError
from ._base import FiniteRange, check_no_cache, claim_cache

#: HTTP retries of one call: with backoff, a busy or briefly absent server is ridden out
DEFAULT_MAX_RETRIES = 5
#: re-asks of an answer that does not parse: a few calls where a model never answers in
#: the format, where the nuggetizer's own bound (500) is hundreds
DEFAULT_RETRIES = 5
#: a chat command's answer is a list (10 questions, 30 nuggets, a window's labels): the
#: nuggetizer's 2048 holds one and a reasoning model's thinking before it (the chat models'
#: and generators' own default, so the library and the commands agree)
CHAT_MAX_TOKENS = NUGGETIZER_MAX_TOKENS

base_url_option = click.option(
    "--base-url", envvar="OPENAI_BASE_URL", default=None, metavar="URL",
    help="endpoint: OpenAI-compatible base URL including /v1 [$OPENAI_BASE_URL; none: a request goes only where "
         "it is told, e.g. https://api.openai.com/v1].")
api_key_env_option = click.option(
    "--api-key-env", default="OPENAI_API_KEY", show_default=True, metavar="VAR",
    help="endpoint: environment variable holding the API key (never taken on the command line).")
concurrency_option = click.option(
    "--concurrency", type=click.IntRange(min=1), default=DEFAULT_CONCURRENCY, show_default=True,
    help="endpoint: requests in flight at most; the window adapts to the server (man exam-nuggets, THROUGHPUT).")
timeout_option = click.option(
    "--timeout", type=FiniteRange(min=0.1, max=86400), default=DEFAULT_TIMEOUT, show_default=True, metavar="SECONDS",
    help="endpoint: seconds per HTTP request (the OpenAI SDK's: a server that serves one request at a time "
         "answers the last of a window late).")
max_retries_option = click.option(
    "--max-retries", type=click.IntRange(min=0), default=DEFAULT_MAX_RETRIES, show_default=True,
    help="endpoint: HTTP retries per call on 429, 5xx, timeouts, connection errors, malformed bodies.")
#: --cache-any-server, one flag in every command that talks to a model
cache_any_server_option = click.option(
    "--cache-any-server", "cache_any_server", is_flag=True, default=None,
    help="endpoint: reuse cached grades and answers of this model from any server (base URL), as for several hosts "
         "serving the same weights; by default only the server that gave them (another may serve other weights under "
         "the same model name).")
cache_option = click.option(
    "--cache", "cache_path", default=None, metavar="FILE", callback=claim_cache,
    help="Grade and answer cache (sqlite) [$EXAM_EVAL_CACHE or ~/.cache/exam_eval/grades.sqlite].")
no_cache_option = click.option("--no-cache", is_flag=True, callback=check_no_cache,
                               help="Neither read nor write the cache.")


def _refuse(reason: str):
    def callback(ctx: click.Context, param: click.Parameter, value):
        if value is not None and not ctx.resilient_parsing:
            raise UsageError(f"{param.opts[0]} is not taken by {ctx.command_path}: {reason}")
        return value
    return callback


def _declared(name: str, type_, default, help_: str, refused: str | None, **kw):
    """The flag; or, where ``refused`` says why the command cannot honour it, the same
    name taking no value into the command and refusing one given."""
    if refused:
        return click.option(name, type=type_, default=None, expose_value=False, callback=_refuse(refused),
                            help=f"Not taken here: {refused}.")
    return click.option(name, type=type_, default=default, show_default=True, help=help_, **kw)


def retries_option(refused: str | None = None):
    return _declared(
        "--retries", click.IntRange(min=0), DEFAULT_RETRIES,
        "Ask again this many times when an answer does not parse, at temperature 0.2 as the nuggetizer re-asks "
        "(exam-genq generate: or at its --temperature where higher).", refused)


def temperature_option(refused: str | None = None):
    return _declared("--temperature", FiniteRange(min=0, max=2), 0.0,
                     "Sampling temperature of the first ask (0 to 2, as the OpenAI API takes it).", refused)


def max_tokens_option(default: int | None = CHAT_MAX_TOKENS, why: str | None = None, dest: str = "max_tokens"):
    """--max-tokens: ``why`` says a default that is not the chat commands' (exam-grade's
    is its back end's)."""
    if why is not None:
        return click.option("--max-tokens", dest, type=click.IntRange(min=1), default=default,
                            help=f"Tokens the model may write per answer [{why}].")
    return click.option("--max-tokens", dest, type=click.IntRange(min=1), default=default, show_default=True,
                        help="Tokens the model may write per answer (the nuggetizer's; an answer that ends "
                             "sooner costs no more).")


#: the server flags, in the order every command lists them
SERVER_OPTIONS = [base_url_option, api_key_env_option, concurrency_option, timeout_option, max_retries_option,
                  cache_any_server_option]

#: why the grading commands refuse the chat commands' --retries and --temperature
GRADE_REFUSES = {
    "retries": "a pair is asked once, at its prompt's published decoding (asked again, a greedy judge says the "
               "same); a rerun with --retry-unparsed grades the unparsed pairs again",
    "temperature": "a grade is decoded as its prompt was published (temperature 0 unless the prompt says otherwise)",
}
#: why the AutoNuggetizer's commands refuse --temperature
NUGGETIZER_REFUSES_TEMPERATURE = ("the AutoNuggetizer's prompts are asked at temperature 0 and re-asked at 0.2, "
                                  "as it asks them")


def flag_block(*options):
    """One decorator of ``options``, listed in the order given."""
    def decorate(f):
        for option in reversed(options):  # click lists options in the order they are written
            f = option(f)
        return f
    return decorate


_HF_DEVICE = "torch device (cpu, cuda, cuda:1)"
#: the flags whose meaning is the role's: for each role the command takes, its
#: (default, help[, what else differs]); a role a flag is missing from does not declare it
ROLE_FLAGS = {
    "--backend": {
        "score": ("hf-seq2seq", "."),
        "chat": ("endpoint", ": endpoint (OpenAI-compatible HTTP: OpenAI, vLLM, TGI), hf-causal (local chat model), "
                             "scripted (canned answers from --script)."),
        "complete": ("endpoint", ": endpoint (OpenAI-compatible HTTP), hf-causal / hf-seq2seq (local Hugging Face "
                                 "model through the grading back ends), scripted (canned answers, --script).")},
    "--model": {
        "score": (None, "Model id or local directory [hf-seq2seq: google/flan-t5-large].", {"metavar": "NAME|DIR"}),
        "chat": (None, "Model name (endpoint) or Hugging Face id / path / .gguf file (hf-causal)."),
        "complete": (None, "Model name (endpoint) or Hugging Face id / path (hf-*).")},
    "--device": {
        "score": (None, f"{_HF_DEVICE}; default: cuda when available."),
        "complete": (None, f"hf-*: {_HF_DEVICE}.")},
    "--dtype": {"score": (None, "Weights dtype (HF back ends)."), "complete": (None, "hf-*: weights dtype.")},
    "--batch-size": {
        "score": (None, "Requests per model call (back-end default otherwise)."),
        "complete": (None, "hf-*: prompts per model call.")},
    "--backend-option": {
        "score": ((), "Further back-end option (repeatable), e.g. -O delay=0.1 for scripted."),
        "chat": ((), "hf-causal: further back-end option (repeatable), as in exam-grade; endpoint: reasoning_effort=low, "
                     "chat_template_kwargs='{\"enable_thinking\": false}' (sent as they are)."),
        "complete": ((), "Further option for the hf-* back end (repeatable), as in exam-grade.")},
    "--script": {
        "chat": (None, "--backend scripted: JSONL rules {\"match\": [strings], \"output\": text}."),
        "complete": (None, "Canned answers for --backend scripted (JSONL).")},
}
#: what else each flag of ROLE_FLAGS is (its parameter name, type, metavar)
_FLAG_KINDS = {
    "--backend": {"metavar": "NAME", "show_default": True},
    "--model": {},
    "--device": {"metavar": "DEV"},
    "--dtype": {"type": click.Choice(["float32", "float16", "bfloat16"])},
    "--batch-size": {"type": click.IntRange(min=1)},
    "--backend-option": {"param_decls": ("-O", "backend_options"), "multiple": True, "metavar": "KEY=VALUE"},
    "--script": {"metavar": "FILE"},
}


def role_option(flag: str, role: str):
    """``flag`` as a command of ``role`` declares it: its default and help there."""
    default, help_, *more = ROLE_FLAGS[flag][role]
    kind = dict(_FLAG_KINDS[flag], **(more[0] if more else {}))
    if flag == "--backend":
        help_ = ", ".join(registry.names(role)) + help_
    return click.option(flag, *kind.pop("param_decls", ()), default=default, help=help_, **kind)


def text_options(role: str) -> list:
    """The model flags of a command whose back end writes text (role chat or complete), in
    the order its --help lists them."""
    if role == "chat":
        return [role_option("--backend", role), role_option("--model", role), role_option("--script", role),
                *SERVER_OPTIONS, retries_option(), max_tokens_option(),
                temperature_option(refused=NUGGETIZER_REFUSES_TEMPERATURE), role_option("--backend-option", role)]
    return [role_option("--backend", role), role_option("--model", role), *SERVER_OPTIONS, retries_option(),
            max_tokens_option(), temperature_option(),
            *(role_option(flag, role) for flag in ("--device", "--dtype", "--batch-size", "--backend-option",
                                                   "--script"))]
