"""A back end with canned outputs, for tests and for dry rehearsals of a pipeline.

The script is a JSON or JSONL file (or, from Python, a callable) of rules::

    {"item": "substring of the bank item", "context": "substring of the passage",
     "output": "4"}                       # generation: the text the "model" answers
    {"context": "...", "probs": {"0": 0.1, "5": 0.9}}   # scoring: label weights
    {"item": "...", "fail": true}         # the model call fails (like an HTTP error)

Rules are tried in order; a missing ``item``/``context`` matches anything. Requests that
no rule matches get a deterministic pseudo-grade derived from a hash of item and
passage text, so a whole pipeline can run without a model and give the same grades
every time. Every rendered prompt is kept in ``seen`` so tests can assert on the exact
text a real model would receive.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Callable, Sequence

from ..errors import InputError
from ..io.jsonl import iter_jsonl, loads_checked
from ..io.openers import display_name, open_text
from .base import flag_option, PromptBackend
from ..grading.types import GradeRequest

Script = Callable[[GradeRequest, str], "str | dict | None"]


def _load_rules(path: str) -> list[dict]:
    name = display_name(path)
    if not Path(path).is_file():
        raise InputError("no such script file", name)
    with open_text(path) as fh:
        head = fh.read(1)
    if head == "[":
        with open_text(path) as fh:
            text = fh.read()
        try:
            rules = loads_checked(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", name, exc.lineno) from None
        except ValueError as exc:
            raise InputError(str(exc), name) from None
        if not isinstance(rules, list):
            raise InputError("expected a JSON list of rules", name)
        numbered = list(enumerate(rules, 1))
    else:
        numbered = list(iter_jsonl(path))
    out = []
    for lineno, rule in numbered:
        if not isinstance(rule, dict) or not ({"output", "probs", "fail"} & set(rule)):
            raise InputError("a rule needs 'output', 'probs' or 'fail'", name, lineno)
        problem = _rule_problem(rule)
        if problem:
            raise InputError(problem, name, lineno)
        out.append(rule)
    return out


def _rule_problem(rule: dict) -> str | None:
    """What is wrong with a rule's values (checked on loading, not mid-grading)."""
    for key in ("item", "context"):
        if key in rule and not isinstance(rule[key], str):
            return f"'{key}' must be a string (a substring to match)"
    probs = rule.get("probs")
    if "probs" in rule and not (isinstance(probs, dict) and probs and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in probs.values())):
        return "'probs' must be an object of label weights (finite numbers >= 0)"
    return None


def _pseudo(req: GradeRequest) -> str:
    digest = hashlib.sha256(f"{req.item_text}\x00{req.context}".encode()).digest()
    low, high = req.prompt.scale
    g = digest[0] % (high - low + 1)
    labels = req.prompt.labels
    # answer in the prompt's own label words (Yes/No, [1]) so every prompt can parse it
    return labels[g] if labels and len(labels) == high - low + 1 else str(low + g)


class ScriptedBackend(PromptBackend):
    name = "scripted"
    reports_label_mass = False  # its label weights are the script's

    def __init__(self, model: str | None = None, script: "str | Script | None" = None,
                 delay: float | str = 0.0, score: bool | str = False, batch_size: int | str = 4,
                 window: int | str | None = None, load_delay: float | str = 0.0):
        self.model_id = model or "scripted"
        self.delay = float(delay)
        self.load_delay = float(load_delay)  # seconds load() takes: a slow model load, for tests
        self.can_score = flag_option("score", score)  # type: ignore[misc]
        self.batch_size = int(batch_size)
        self._window = None if window is None else int(window)
        if script is None or callable(script):
            self._rules: list[dict] = []
            self._func = script
        else:
            self._rules = _load_rules(str(script))
            self._func = None
        # another script (or scoring instead of generating) answers otherwise: another grader
        digest = hashlib.sha256(json.dumps(self._rules, sort_keys=True).encode()).hexdigest()[:12]
        self._identity = (f":script={digest}" if self._rules else "") + (":score" if self.can_score else "") + \
            (f":window={self._window}" if self._window is not None else "")
        self.seen: list[str] = []
        self.calls = 0

    @property
    def context_window(self) -> int | None:
        return self._window

    @property
    def cache_identity(self) -> str:
        return super().cache_identity + self._identity

    def load(self) -> None:
        if self.load_delay:
            time.sleep(self.load_delay)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        words = text.split()
        return text if len(words) <= max_tokens else " ".join(words[:max(0, max_tokens)])

    def _answer(self, req: GradeRequest, rendered: str):
        if self._func is not None:
            return self._func(req, rendered)
        for rule in self._rules:
            if "item" in rule and (req.item_text is None or rule["item"] not in req.item_text):
                continue
            if "context" in rule and rule["context"] not in req.context:
                continue
            if rule.get("fail"):
                return None
            return rule["probs"] if "probs" in rule else str(rule["output"])
        return _pseudo(req)

    def _step(self, requests: Sequence[GradeRequest]) -> list:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        out = []
        for req in requests:
            rendered = self.render(req)
            self.seen.append(rendered)
            out.append(self._answer(req, rendered))
        return out

    def _generate(self, requests, max_new_tokens):
        return [a if (a is None or isinstance(a, str)) else None for a in self._step(requests)]

    def _score(self, requests, labels):
        out = []
        for _req, a in zip(requests, self._step(requests)):
            if isinstance(a, dict):
                out.append({str(k): float(v) for k, v in a.items()})
            elif isinstance(a, str) and a.strip() in labels:
                out.append({a.strip(): 1.0})
            elif a is None:
                out.append(None)  # a scripted failure
            else:
                out.append({})  # text that is no label: unreadable, recorded as such
        return out
