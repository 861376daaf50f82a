"""A client of any role from a command's flags (:func:`make_client`, the one factory: it
refuses a flag the back end does not take, in one way for every role), and for grading
the --backend-option pairs, the checks against the prompt and EXAM++'s answer verifier.
exam-grade, exam-nuggets support and api.grade build their graders here, the chat
commands their chat models; nothing is loaded until the first batch."""

from __future__ import annotations

import inspect
import math
from typing import Any

from ..errors import UsageError
from .base import Backend, PromptBackend
from .registry import client_class
from ..grading.parsing import RATING_RULES
from ..grading.prompts import get_prompt


#: how a refusal names a keyword whose flag is not its name with dashes
FLAG_NAMES = {"backend_options": "--backend-option", "max_new_tokens": "--max-tokens"}


def make_client(name: str, role: str, **options: Any):
    """A client of back end ``name`` for ``role`` (registry.ROLES). Options set to None are
    left at the client's default; one it does not take is a usage error naming its flag.
    A text client (chat, complete) is told its ``role`` and ``name`` where it takes them."""
    min_mass = options.pop("min_label_mass", None) if role == "score" else None
    cls = check_client(name, role, options)
    given = {k: v for k, v in options.items() if v is not None}
    if role != "score":
        params = inspect.signature(cls.__init__).parameters
        given.update({k: v for k, v in (("role", role), ("name", name)) if k in params})
    client = cls(**given)
    if min_mass is not None:
        _set_min_label_mass(client, min_mass)
    return client


def check_client(name: str, role: str, options: dict) -> type:
    """The class :func:`make_client` would make for these options, refusing any (not None)
    it does not take, before anything is made (a dry run's check)."""
    cls = client_class(name, role)
    if hasattr(cls, "select_class"):  # one back end, several engines (hf-seq2seq: torch, ctranslate2)
        cls = cls.select_class(options)
    refuse_untaken(name, cls, [k for k, v in options.items() if v is not None])
    return cls


def get_backend(name: str, **options: Any) -> Backend:
    """The grader of back end ``name``: :func:`make_client` for the ``score`` role."""
    return make_client(name, "score", **options)


def refuse_untaken(name: str, cls: type, given) -> None:
    """A usage error naming the flags of ``given`` (keywords) that ``cls`` does not take;
    a grader that keeps Backend's ``**_ignored`` takes any."""
    if cls.__init__ is Backend.__init__:
        return
    params = inspect.signature(cls.__init__).parameters
    rejected = sorted(k for k in given if k not in params)
    if rejected:
        flags = ", ".join(FLAG_NAMES.get(r, "--" + r.replace("_", "-")) for r in rejected)
        raise UsageError(f"back end {name!r} does not take {flags}")


def _set_min_label_mass(grader, value) -> None:
    """--min-label-mass: where a scored grade stands (DEFAULT_MIN_LABEL_MASS)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= 1:
        raise UsageError(f"--min-label-mass: expected a share from 0 to 1, got {value!r}")
    # kept by a back end that scores no labels too: its LLM verifier (--verify llm) takes it over
    grader.min_label_mass = float(value)


#: settings that are flags in every command that talks to a model (not -O pairs)
FLAGS = {"timeout": "--timeout", "max_retries": "--max-retries", "max_new_tokens": "--max-tokens"}


def split_backend_options(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise UsageError(f"--backend-option must be KEY=VALUE, got {v!r}")
        out[key.strip().replace("-", "_")] = _scalar(value)
    return out


def _scalar(value: str):
    """``-O batch_size=4`` means the number 4, ``-O logprobs=false`` the boolean."""
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _check_numbers(backend: str, extra: dict, label: str = "--backend-option ") -> None:
    """A --backend-option for a count or a number of seconds must be one, before any
    work: ``-O batch_size=x`` or ``-O delay=nan`` would otherwise fail mid-grading; one
    for a text (a model name) must be text. ``label``: how messages name the option."""
    # the class as registered: an engine's own class (select_class) may take more
    # options, which are then not checked here
    params = inspect.signature(client_class(backend, "score").__init__).parameters
    for key, value in extra.items():
        annotation = params[key].annotation if key in params else None
        kinds = {t.strip() for t in annotation.split("|")} if isinstance(annotation, str) else set()
        if "int" in kinds and "float" not in kinds:
            ok, want = isinstance(value, int) and not isinstance(value, bool) and value >= 0, "a whole number >= 0"
        elif "float" in kinds:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
            want = "a finite number >= 0"
        elif kinds and kinds <= {"str", "None"}:
            ok, want = value is None or isinstance(value, str), "text"
        else:
            continue
        if not ok:
            raise UsageError(f"{label}{key}: expected {want}, got {value!r}")


def make_grader(backend: str, options: dict, backend_options: tuple[str, ...], prompt):
    """The back end of the flags (``options``, None where not given) and the --backend-option
    pairs, checked against ``prompt``; validates options and model path, loads nothing.
    ``options`` takes the --backend-option values too (the verifier reads them)."""
    extra = split_backend_options(backend_options)
    flagged = sorted(set(extra) & set(FLAGS))
    if flagged:  # -O carries a server's own extras; the settings every command shares are flags
        raise UsageError(f"-O {flagged[0]}= is the flag {FLAGS[flagged[0]]} (as in exam-genq and exam-nuggets): "
                         "give that")
    clash = sorted(set(extra) & {k for k, v in options.items() if v is not None})
    if clash:
        raise UsageError(f"option given twice (flag and --backend-option): {', '.join(clash)}")
    options.update(extra)
    _check_numbers(backend, extra)
    _check_numbers(backend, {k: v for k, v in options.items() if v is not None and k not in extra},
                   "option ")  # api.grade's keywords
    grader = get_backend(backend, **options)
    grader.check_prompt(prompt)
    _check_rating_rule(grader, backend, prompt)
    return grader


def _check_rating_rule(grader, backend: str, prompt) -> None:
    """--rating-rule reads a generated rating; where the back end scores the labels (or
    reads no text at all) it would change nothing but the prompt's id."""
    rule = next((name for name, parser in RATING_RULES.items() if parser == prompt.parser), "strict")
    will_score = getattr(grader, "will_score", None)
    if rule != "strict" and (will_score is None or will_score(prompt)):
        raise UsageError(f"--rating-rule {rule} reads generated ratings, and back end {backend!r} "
                         + ("scores the labels' probabilities: add --generate-ratings" if will_score
                            else "generates no text"))


def attach_verifier(grader, backend: str, verifier_model, verifier_backend: str, options: dict) -> None:
    """EXAM++'s LLM answer verification, by the grading model or by a model of its own."""
    verifier = get_prompt("answer-verification")
    if not grader.can_verify:
        raise UsageError(f"--verify llm: back end {backend!r} has no extracted answers to verify")
    if verifier_model:
        cls = client_class(verifier_backend, "score")
        if not issubclass(cls, PromptBackend):
            raise UsageError(f"--verifier-backend must be an LLM back end, not {verifier_backend!r}")
        # the grading options that also make sense for the verifier (device, server ...)
        shared = ("device", "dtype", "base_url", "api_key_env", "concurrency")
        params = inspect.signature(cls.__init__).parameters
        kw = {k: options.get(k) for k in shared if k in params and options.get(k) is not None}
        vb = get_backend(verifier_backend, model=verifier_model, **kw)
        # the verifier's scored verdicts stand where the grader's would
        vb.min_label_mass = getattr(grader, "min_label_mass", vb.min_label_mass)
        vb.check_prompt(verifier)
        grader.verifier_backend = vb
    elif not isinstance(grader, PromptBackend):
        raise UsageError(f"--verify llm with {backend!r}: give the verifying LLM with --verifier-model")
    grader.verifier = verifier
