"""Reading what an OpenAI-compatible server sent back, trusting none of it: the body (size,
compression, encoding), its error messages (one printable line), Retry-After, and the
logprobs blocks, where a value that is not a log-probability makes the whole block
unusable (the answer is then read from its text, as where a server sends none).
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
import zlib

#: the most a reply may be: a chat completion with top-20 logprobs over 512 tokens is
#: about 1 MiB; anything near this is a misbehaving server, not an answer
MAX_BODY = 32 * 2**20
# control characters (terminal escapes, carriage returns) and runs of white space
_UNPRINTABLE = re.compile(r"[\x00-\x20\x7f-\x9f\u2028\u2029]+")
# a log-probability a little above 0 is rounding (llama.cpp prints 1e-7); far above is not one
_LOGPROB_SLACK = 1e-3


class BadReply(ValueError):
    """The body cannot be read as a reply (too large, a compression or encoding it does not use)."""


def one_line(text: str, limit: int = 300) -> str:
    """A server's words as one printable line: control characters and runs of white space
    become one space (a reply's ``\\r`` or escape sequence must not rewrite the terminal)."""
    text = _UNPRINTABLE.sub(" ", text).strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def decoded_body(raw: bytes, encoding: str | None) -> bytes:
    """The body as sent before a Content-Encoding (gzip, deflate), at most MAX_BODY bytes.
    The client asks for none, but a proxy may compress anyway."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return raw
    if enc not in ("gzip", "x-gzip", "deflate"):
        raise BadReply(f"the reply is compressed with {enc!r}, which this client does not read")
    # wbits 47: gzip or zlib headers, told apart by the data; deflate may also come raw
    for wbits in ((47,) if "gzip" in enc else (47, -15)):
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(raw, MAX_BODY + 1)
        except zlib.error:
            continue
        if len(out) > MAX_BODY or d.unconsumed_tail:
            raise BadReply(f"the reply is larger than {MAX_BODY // 2**20} MiB once decompressed")
        return out
    raise BadReply(f"the reply says Content-Encoding {enc} but is not {enc} data")


def json_body(raw: bytes):
    """The reply's JSON; a body that is not UTF-8 is said to be that, not "malformed JSON"."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadReply(f"the reply is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: a body nested without end
        raise BadReply(f"malformed JSON in response body: {one_line(text[:80], 100)!r}") from None


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds a Retry-After asks for; None where it says nothing usable (negative, not a
    number, a date that cannot be read): the client's own back-off applies then."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is None:
        try:  # the HTTP-date form
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        try:
            return max(0.0, when.timestamp() - time.time())
        except (OverflowError, ValueError):
            return None
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds


def error_message(body: bytes) -> str:
    """The server's own explanation, if the body carries the usual ``{"error": ...}``."""
    try:
        obj = json.loads(body)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return one_line(str(err["message"]))
        if isinstance(err, str):
            return one_line(err)
        # FastAPI's HTTPException (transformers serve); vLLM's older ErrorResponse, unwrapped
        for key in ("detail", "message"):
            said = obj.get(key) if isinstance(obj, dict) else None
            if isinstance(said, str) and said:
                return one_line(said)
    except (ValueError, UnicodeDecodeError, RecursionError):
        pass
    return one_line(body[:600].decode("utf-8", "replace"))


class _NotLogprobs(Exception):
    pass


def _logprob(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _NotLogprobs
    value = float(value)
    if math.isnan(value) or value > _LOGPROB_SLACK:
        raise _NotLogprobs
    return min(value, 0.0)


def _token(value) -> str:
    if not isinstance(value, str):
        raise _NotLogprobs
    return value


def chat_logprobs(choice: dict) -> list[dict[str, float]] | None:
    """Per generated token, ``{token: logprob}`` of its alternatives (chat API); None where
    the block is absent or holds anything that is not a token and a log-probability."""
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not isinstance(lp.get("content"), list):
        return None
    try:
        out = []
        for tok in lp["content"]:
            if not isinstance(tok, dict):
                raise _NotLogprobs
            tops = tok.get("top_logprobs") or []
            if not isinstance(tops, list) or not all(isinstance(a, dict) for a in tops):
                raise _NotLogprobs
            alts = {_token(a.get("token")): _logprob(a.get("logprob")) for a in tops}
            if not alts and "token" in tok:
                alts = {_token(tok["token"]): _logprob(tok.get("logprob"))}
            out.append(alts)
        return out
    except _NotLogprobs:
        return None


def completion_logprobs(choice: dict) -> list[dict[str, float]] | None:
    """The same from the legacy completions API."""
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return None
    try:
        tops = lp.get("top_logprobs")
        if isinstance(tops, list):
            out = []
            for t in tops:
                if t is not None and not isinstance(t, dict):
                    raise _NotLogprobs
                out.append({_token(k): _logprob(v) for k, v in (t or {}).items()})
            return out
        tokens, logprobs = lp.get("tokens"), lp.get("token_logprobs")
        if isinstance(tokens, list) and isinstance(logprobs, list):
            return [{_token(t): _logprob(v)} for t, v in zip(tokens, logprobs) if v is not None]
    except _NotLogprobs:
        return None
    return None


#: the most tokens one reply may say it used; a larger count is not a count but a
#: misbehaving server, and would swamp a run's totals
MAX_TOKENS_SAID = 10**9


def _count(value) -> int | None:
    # bool is an int to Python, and JSON's true is no token count
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS_SAID:
        return None
    return value


def usage_counts(body: dict) -> dict[str, int] | None:
    """``{"prompt_tokens", "completion_tokens", "reasoning_tokens"}`` from the body's
    ``usage``; None where the server gave no usable prompt and completion counts (a reply
    counted wrongly would be worse than one counted as saying nothing). Reasoning tokens
    (``completion_tokens_details.reasoning_tokens``) are 0 where not said."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    details = usage.get("completion_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    return {"prompt_tokens": prompt, "completion_tokens": completion, "reasoning_tokens": reasoning or 0}


def reasoning_text(message: dict) -> str | None:
    """A reasoning model's thinking, which servers put beside the answer: vLLM, DeepSeek
    and llama.cpp as ``reasoning_content``, newer vLLM, OpenRouter and Ollama as
    ``reasoning``."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str):
            return value
    return None


def model_name(value) -> str | None:
    """A model id the server reported, as one printable line (it may be printed), or None."""
    if not isinstance(value, str):
        return None
    return one_line(value) or None


def model_ids(body) -> list[str] | None:
    """The ids of a ``/models`` listing (``{"data": [{"id": ...}, ...]}``); None where the
    body is not that shape. Entries without a usable id are left out."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    ids = (model_name(entry.get("id")) for entry in data if isinstance(entry, dict))
    return [i for i in ids if i is not None]
