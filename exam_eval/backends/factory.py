"""A back end from a command's flags: the --backend-option pairs, the checks against the
prompt, and EXAM++'s answer verifier. exam-grade, exam-nuggets support and api.grade
build their graders here; nothing is loaded until the first batch."""

from __future__ import annotations

from ..errors import UsageError
from .base import PromptBackend, backend_class, get_backend
from ..grading.parsing import RATING_RULES
from ..grading.prompts import get_prompt


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
    import inspect
    import math

    # the class as registered: an engine's own class (select_class) may take more
    # options, which are then not checked here
    params = inspect.signature(backend_class(backend).__init__).parameters
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
    import inspect

    verifier = get_prompt("answer-verification")
    if not grader.can_verify:
        raise UsageError(f"--verify llm: back end {backend!r} has no extracted answers to verify")
    if verifier_model:
        cls = backend_class(verifier_backend)
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
