"""Custom prompts from a text file (``exam-grade --prompt my_prompt.txt``).

The file is the prompt text with placeholders ``{query}``, ``{question}``, ``{nugget}``,
``{item}``, ``{context}``, ``{answer}``, ``{correct_answer}``. It may start with
front-matter lines ``# key: value``; the first line that is not one ends the front matter
(a blank line right after the front matter is dropped, so the text itself may start with
"#"). Keys:

    # target: question | nugget | direct   (default: from the placeholders)
    # mode: score | generate                (default: score when labels are given)
    # labels: 0 1 2 3                        (score mode: label i stands for grade scale_min + i)
    # scale: 0 3                             (default: from integer labels, else 0 5)
    # parser: rating | yesno | thomas | umbrela | extraction   (default: rating)
    # verify: yes | no                       (extraction: grade by answer-key verification)
    # source: free text                      (shown in listings)

A line ``=== system ===`` starts a system part and ``=== user ===`` the user part, for
chat models; without them the whole text is the user part. Text is used exactly as
written except that one final newline is removed. The prompt is registered as
``file:PATH``; its hash covers the text, so editing the file invalidates cached grades.
"""

from __future__ import annotations

import re
from pathlib import Path

from exam_eval.errors import InputError
from exam_eval.grading.parsing import PARSERS
from exam_eval.io.trec_rules import LABEL_MAX
from exam_eval.grading.prompts.base import MODES, PLACEHOLDER, TARGETS, Prompt

_FRONT = re.compile(r"^#\s*([A-Za-z_-]+)\s*:\s*(.*?)\s*$")
_ANY_BRACED = re.compile(r"\{([A-Za-z_][A-Za-z0-9_ ]*)\}")
KEYS = ("target", "mode", "labels", "scale", "parser", "verify", "source")


def _default_scale(labels: tuple[str, ...], parser: str) -> tuple[int, int]:
    if labels:
        try:
            ints = [int(x.strip("[]()")) for x in labels]
        except ValueError:
            return (0, len(labels) - 1)
        if ints == list(range(ints[0], ints[0] + len(ints))):
            return (ints[0], ints[-1])
        return (0, len(labels) - 1)
    return {"yesno": (0, 1), "extraction": (0, 1), "umbrela": (0, 3)}.get(parser, (0, 5))


# the grades reader's bound on a custom prompt's grade: a larger scale would write grades
# that no command can read back
SCALE_LIMIT = LABEL_MAX


def load_prompt_file(path: str | Path) -> Prompt:
    name = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"prompt file is not UTF-8 text ({exc.reason})", name) from None
    except OSError as exc:
        raise InputError(f"cannot read prompt file: {exc.strerror}", name) from None

    lines = raw.split("\n")
    meta: dict[str, tuple[str, int]] = {}
    i = 0
    while i < len(lines):
        m = _FRONT.match(lines[i])
        if not m:
            break
        key = m.group(1).lower()
        if key not in KEYS:
            raise InputError(f"unknown front-matter key {key!r} (known: {', '.join(KEYS)})", name, i + 1)
        meta[key] = (m.group(2), i + 1)
        i += 1
    if meta and i < len(lines) and not lines[i].strip():
        i += 1
    body_start = i + 1
    body = "\n".join(lines[i:])
    if body.endswith("\n"):
        body = body[:-1]

    system = None
    parts = re.split(r"^=== (system|user) ===\n?", body, flags=re.MULTILINE)
    if len(parts) > 1:
        if parts[0].strip():
            raise InputError("text before the first '=== system ===' / '=== user ===' line", name, body_start)
        sections = dict(zip(parts[1::2], parts[2::2]))
        system = sections.get("system")
        if system is not None:
            system = system.rstrip("\n")
        body = sections.get("user", "").rstrip("\n")
    if not body.strip():
        raise InputError("prompt file has no prompt text", name)

    # A misspelt placeholder would silently stay literal: name it with its line.
    for offset, line in enumerate(raw.split("\n")[i:], start=body_start):
        for m in _ANY_BRACED.finditer(line):
            if not PLACEHOLDER.fullmatch(m.group(0)):
                raise InputError(
                    f"unknown placeholder {m.group(0)} (known: {{query}} {{question}} {{nugget}} {{item}} "
                    f"{{context}} {{answer}} {{correct_answer}})", name, offset)

    used = {m.group(1) for m in PLACEHOLDER.finditer(body + (system or ""))}
    if not used & {"context", "answer"}:
        raise InputError("prompt text has no {context} placeholder: the passage would never be shown", name)

    def get(key, default=None):
        return meta[key][0] if key in meta else default

    def line_of(key):
        return meta[key][1] if key in meta else None

    target = get("target")
    if target is None:
        target = "nugget" if "nugget" in used else "question" if used & {"question", "item"} else "direct"
    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}, not {target!r}", name, line_of("target"))
    labels = tuple(get("labels", "").split())
    mode = get("mode", "score" if labels else "generate")
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}", name, line_of("mode"))
    if mode == "score" and not labels:
        raise InputError("score mode needs '# labels: ...' (one label per grade)", name, line_of("mode"))
    parser = get("parser", "extraction" if get("verify", "no").lower() in ("yes", "true") else "rating")
    if parser not in PARSERS:
        raise InputError(f"parser must be one of {', '.join(sorted(PARSERS))}, not {parser!r}", name,
                         line_of("parser"))
    if "scale" in meta:
        nums = re.findall(r"-?\d+", get("scale"))
        if len(nums) != 2 or any(len(n.lstrip("-")) > 5 or abs(int(n)) > SCALE_LIMIT for n in nums):
            raise InputError(f"scale must be 'MIN MAX' within -{SCALE_LIMIT}..{SCALE_LIMIT}, not {get('scale')!r}",
                             name, line_of("scale"))
        if int(nums[0]) > int(nums[1]):
            raise InputError(f"scale must be 'MIN MAX', not {get('scale')!r}", name, line_of("scale"))
        scale = (int(nums[0]), int(nums[1]))
    else:
        scale = _default_scale(labels, parser)
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise InputError(f"label {twice[0]!r} is given twice: each grade needs its own label (their "
                         "probabilities are compared)", name, line_of("labels"))
    if labels and len(labels) != scale[1] - scale[0] + 1:
        raise InputError(f"{len(labels)} labels for the scale {scale[0]}-{scale[1]}: one label per grade is needed",
                         name, line_of("labels"))
    verify = get("verify", "yes" if parser == "extraction" and target == "question" else "no").lower()
    if verify not in ("yes", "no", "true", "false"):
        raise InputError(f"verify must be yes or no, not {verify!r}", name, line_of("verify"))

    return Prompt(
        id=f"file:{name}",
        source=get("source", f"file {name}"),
        target=target,
        mode=mode,
        labels=labels,
        scale=scale,
        template=body,
        system=system,
        needs_verification=verify in ("yes", "true"),
        parser=parser,
        description=f"custom prompt from {name}",
    )
