"""What the labelling page says each label means: the track's own wording, so that a
person labels on the scale the LLM's prompt and the official qrels used.

The defaults are the guidelines the labels of the papers' collections were made with: TREC
Deep Learning's four grades (0-3, as in the UMBRELA and CI papers' prompts), the
three-point scale of Robust04 (0-2, the CI paper's Listing 2), and binary relevance; nugget
mode's are the AutoNuggetizer's assignment levels. ``--guidelines FILE`` replaces them: a
TSV line per label, ``LABEL<TAB>NAME<TAB>WHAT IT MEANS``, every label of the scale once.
"""

from __future__ import annotations

from ..errors import InputError
from ..io.openers import display_name, iter_lines

DEFAULTS: dict[int, list[tuple[str, str]]] = {
    3: [("Irrelevant", "The passage has nothing to do with the query."),
        ("Related", "The passage seems related to the query but does not answer it."),
        ("Highly relevant", "The passage has some answer for the query, but the answer may be a bit unclear, or "
                            "hidden amongst extraneous information."),
        ("Perfectly relevant", "The passage is dedicated to the query and contains the exact answer.")],
    2: [("Not relevant", "The document is not relevant to the query."),
        ("Relevant", "Parts of the document may be relevant to the query."),
        ("Highly relevant", "The document is highly relevant to the query.")],
    1: [("Not relevant", "The passage does not answer the query."),
        ("Relevant", "The passage answers the query.")],
}
NUGGET = [("Not support", "The report does not support the nugget."),
          ("Partial support", "The report supports the nugget in part."),
          ("Support", "The report fully supports the nugget.")]


def default_guidelines(top: int, mode: str) -> list[tuple[str, str]]:
    return list(NUGGET if mode == "nugget" else DEFAULTS[top])


def read_guidelines(path: str, top: int) -> list[tuple[str, str]]:
    """``LABEL<TAB>NAME<TAB>TEXT`` lines, one for each label 0..TOP (blank lines and lines
    starting with # are skipped); anything else is one line naming file and line."""
    name = display_name(path)
    got: dict[int, tuple[str, str]] = {}
    for lineno, line in iter_lines(path):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in line.rstrip("\r\n").split("\t")]
        if len(cells) not in (2, 3) or not cells[1]:
            raise InputError("expected 'LABEL<TAB>NAME<TAB>WHAT IT MEANS'", name, lineno)
        if not cells[0].isdigit() or not 0 <= int(cells[0]) <= top:
            raise InputError(f"label {cells[0]!r} is not one of the scale's 0-{top}", name, lineno)
        if int(cells[0]) in got:
            raise InputError(f"label {cells[0]} is given twice", name, lineno)
        got[int(cells[0])] = (cells[1], cells[2] if len(cells) == 3 else "")
    lacking = [str(g) for g in range(top + 1) if g not in got]
    if lacking:
        raise InputError(f"no wording for label {', '.join(lacking)} of the scale 0-{top}", name)
    return [got[g] for g in range(top + 1)]
