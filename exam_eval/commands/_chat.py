"""The flags of the commands that run the AutoNuggetizer's prompts through a chat model
(``exam-nuggets assign``, ``exam-genq nuggetize``), so both take the same ones: the
model flags of the chat role (:mod:`._model_flags`) as one :class:`._options.ModelFlags`,
and the cache flags."""

from __future__ import annotations


from ..backends.context_limit import too_long_line
from ..backends.factory import make_client
from ..grading.cache import GradeCache, NullCache, cache_file
from ._model_flags import cache_option, flag_block, no_cache_option
from ._options import ModelFlags, model_flags


def chat_options(f):
    return cache_options(model_flags("chat")(f))


def cache_options(f):
    """--cache / --no-cache of the commands that keep model answers in the grade cache."""
    return flag_block(cache_option, no_cache_option)(f)


def make_chat(flags: ModelFlags, base_url: str | None):
    """The chat model of the flags (``base_url``: the one the batch check gives); checks
    them, loads nothing."""
    return make_client(flags.backend, "chat", **{**flags.client_options(), "base_url": base_url})


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
