"""Listwise nugget assignment: the AutoNuggetizer's assigner, as the TREC RAG tracks run it.

Each report is judged whole (its sentences joined by single spaces, ``Report.text``)
against its topic's nuggets, up to ``window`` (10) nuggets per call, in bank order,
with the nuggetizer's prompt, word for word (castorini/nuggetizer ``models/nuggetizer.py``
``_create_assign_prompt`` / ``_get_assign_prompt_content``, the package installed with
the test extras): a system message and a user message whose instruction is the 3-grade
(support / partial_support / not_support) or the 2-grade (support / not_support) one.

The answer is read as the nuggetizer reads it (code fences dropped, ``ast.literal_eval``,
labels lower-cased and paired with the window's nuggets in order) and re-asked as it
re-asks (:mod:`exam_eval.grading.asking`). A report with no text is not sent: every
nugget is not_support, as in the nuggetizer.

Every (report, nugget) becomes one grade line (query_id the topic, doc_id the report id
``run/topic/report-md5``, the keys ``exam-nuggets score`` reads for a whole report), with
grade support 2, partial_support 1, not_support 0 and the window's raw answer. An answer
is final (and cached) only when it gives labels, one for each of the window's nuggets
(:func:`window_parser`): a list of other words (a model that echoes the nugget texts), a
short list or a label the nuggetizer does not know is asked again at temperature 0.2,
where the nuggetizer would keep it or silently drop the nuggets left without a label
(``zip``). After the last re-ask the last answer stands: each nugget it gives a label
has its grade, the others are ``parse_ok: false`` (scored as no support, counted,
written "failed" in the assign-output file as the nuggetizer writes a window that never
parsed), never a guessed grade; the window is not cached, so a rerun asks it again.

A window's cache key holds the model, the prompt text, the query, the report text and
the window's nugget texts: editing the bank regrades exactly the windows whose nuggets
changed, and an unchanged window never goes stale.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..errors import InputError
from ..io.banks import require_bank_topics
from ..io.bank_items import BankItem
from ..io.grades import Grade, grade_line
from ..io.outputs import atomic_output
from ..io.reports import Report
from ..progress import progress_bar
from .asking import Ask, Answer, Asker, parse_python_list
from .cache import NullCache, unit_key

SYSTEM = ("You are NuggetizeAssignerLLM, an intelligent assistant that can label a list of atomic nuggets "
          "based on if they are captured by a given passage.")

INSTRUCTIONS = {
    2: ("Based on the query and passage, label each of the {n} nuggets either as support or not_support using "
        "the following criteria. A nugget that is fully captured in the passage should be labeled as support; "
        "otherwise, label them as not_support. Return the list of labels in a Pythonic list format (type: "
        "List[str]). The list should be in the same order as the input nuggets. Make sure to provide a label "
        "for each nugget."),
    3: ("Based on the query and passage, label each of the {n} nuggets either as support, partial_support, or "
        "not_support using the following criteria. A nugget that is fully captured in the passage should be "
        "labeled as support. A nugget that is partially captured in the passage should be labeled as "
        "partial_support. If the nugget is not captured at all, label it as not_support. Return the list of "
        "labels in a Pythonic list format (type: List[str]). The list should be in the same order as the input "
        "nuggets. Make sure to provide a label for each nugget."),
}

USER = """{instruction}

Search Query: {query}
Passage: {context}
Nugget List: {nuggets}
Only return the list of labels (List[str]). Do not explain.
Labels:"""

PROMPT_IDS = {3: "nuggetizer-listwise", 2: "nuggetizer-listwise-2"}
LABEL_GRADES = {"not_support": 0, "partial_support": 1, "support": 2}
SCALE = (0, 2)
WINDOW = 10


def prompt_hash(grades: int) -> str:
    text = json.dumps([SYSTEM, INSTRUCTIONS[grades], USER])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def messages(query: str, context: str, nuggets: Sequence[str], grades: int = 3) -> list[dict]:
    """The nuggetizer's two messages for one window (``nuggets``: their texts)."""
    instruction = INSTRUCTIONS[grades].format(n=len(nuggets))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER.format(instruction=instruction, query=query, context=context,
                                                    nuggets=list(nuggets))}]


def read_labels(text: str) -> list[str] | None:
    """The answer as the nuggetizer reads it: a Python list of strings, lower-cased
    (None: it does not read as one)."""
    labels = parse_python_list(text)
    return None if labels is None else [label.lower() for label in labels]


def parse_labels(text: str) -> list[str] | None:
    """An answer that gives labels: a non-empty list of support / partial_support /
    not_support (any case); anything else (a list of the nugget texts echoed back, of
    other words, an empty list) is None: not final, not cached, asked again."""
    labels = read_labels(text)
    if not labels or any(label not in LABEL_GRADES for label in labels):
        return None
    return labels


def window_parser(n: int):
    """What a window of ``n`` nuggets accepts: labels, at least one per nugget (the
    nuggetizer pairs them in order and drops what is left over)."""
    def parse(text: str) -> list[str] | None:
        labels = parse_labels(text)
        return labels if labels is not None and len(labels) >= n else None

    return parse


@dataclass
class Window:
    report: Report
    items: list[BankItem]
    ask: Ask | None  # None: the report has no text, nothing is asked


def plan_windows(reports: Sequence[Report], items: Mapping[str, Sequence[BankItem]], queries: Mapping[str, str],
                 *, identity: str, grades: int = 3, window: int = WINDOW) -> list[Window]:
    """The windows of every report whose topic has items, reports in input order."""
    phash = prompt_hash(grades)
    out = []
    for r in reports:
        topic_items = list(items.get(r.topic_id) or ())
        query = queries.get(r.topic_id, "")
        for start in range(0, len(topic_items), window):
            chunk = topic_items[start:start + window]
            if not r.text.strip():
                out.append(Window(r, chunk, None))
                continue
            texts = [i.text for i in chunk]
            key = unit_key(identity, phash, query, json.dumps(texts, ensure_ascii=False), r.text, None)
            out.append(Window(r, chunk, Ask(key, messages(query, r.text, texts, grades), window_parser(len(chunk)))))
    return out


def window_grades(w: Window, answer: Answer | None, *, model: str, grades: int = 3) -> list[Grade]:
    """The grade lines of one window (``answer`` None: the report has no text)."""
    prompt, phash = PROMPT_IDS[grades], prompt_hash(grades)
    out = []
    for k, item in enumerate(w.items):
        if answer is None:
            grade, text = LABEL_GRADES["not_support"], ""
        else:  # an answer that never gave a label for each nugget: what labels it has, the rest unparsed
            labels = answer.value if answer.parsed else (read_labels(answer.text or "") or [])
            grade = LABEL_GRADES.get(labels[k]) if k < len(labels) else None
            text = answer.text
        out.append(Grade(query_id=w.report.topic_id, doc_id=w.report.doc_id, item_id=item.item_id, kind=item.kind,
                         grade=grade, probs=None, answer=text, parse_ok=grade is not None, model=model,
                         prompt=prompt, prompt_hash=phash, item_hash=item.text_hash))
    return out


def assign_reports(reports: Sequence[Report], items: Mapping[str, Sequence[BankItem]], queries: Mapping[str, str],
                   asker: Asker, *, grades: int = 3, window: int = WINDOW) -> tuple[list[Grade], int]:
    """Grade lines of every (report, nugget); returns them and the number of windows
    whose calls failed (their nuggets get no line; a rerun asks again). A window whose
    (re-)ask went to a batch file (``Answer.pending``) gets no line either, and is not
    a failure: a later round answers it."""
    asker.parse = parse_labels
    asker.prompt_hash = prompt_hash(grades)
    windows = plan_windows(reports, items, queries, identity=asker.chat.cache_identity, grades=grades,
                           window=window)
    answers = asker.ask([w.ask for w in windows if w.ask is not None])
    lines: list[Grade] = []
    failed = 0
    for w in windows:
        answer = None if w.ask is None else answers[w.ask.key]
        if answer is not None and answer.error is not None:
            failed += 1
            continue
        if answer is not None and answer.pending:
            continue
        lines.extend(window_grades(w, answer, model=asker.chat.model_id, grades=grades))
    return lines, failed


@dataclass
class AssignResult:
    grades: list[Grade]
    failed: int  # windows whose calls failed (not written)
    stats: object  # asking.AskStats
    reports: list  # the reports assigned (those on a bank topic)


def run_assign(reports: Sequence[Report], items: Mapping[str, Sequence[BankItem]], queries: Mapping[str, str],
               chat, *, cache=None, grades: int = 3, window: int = WINDOW, retries: int = 5,
               output: str | None = None, log=None,
               bank_name: str | None = None, topics_name: str | None = None,
               failure_line: Callable[[], str | None] | None = None) -> AssignResult:
    """What ``exam-nuggets assign`` does: check the inputs, assign with a progress bar,
    write the grade lines (atomically). The nuggetizer's assign-output file is scoring's
    (measures.assignment_scores.write_listwise_assignments). ``failure_line``: the
    command's one line for failed calls where it has one (a prompt too long for the model),
    said in place of the most frequent error."""
    log = log or (lambda msg: None)
    require_bank_topics(reports, items, bank_name)
    scored = [r for r in reports if items.get(r.topic_id)]
    missing = sorted({r.topic_id for r in scored} - set(queries))
    if missing:
        raise InputError(f"no query text for topics {', '.join(missing[:5])} (the prompt shows the query)", topics_name)
    if len(scored) < len(reports):
        log(f"{len(reports) - len(scored)} reports are on topics without bank items and are not assigned")
    asker = Asker(chat, parse_labels, retries=retries, cache=cache or NullCache())
    nwin = sum(-(-len(items[r.topic_id]) // window) for r in scored if r.text.strip())
    try:
        with progress_bar(nwin, "assigning nuggets", "windows") as bar:
            asker.on_chunk = bar.advance
            lines, failed = assign_reports(scored, items, queries, asker, grades=grades, window=window)
    finally:
        asker.cache.close()
        chat.close()
    pending = asker.stats.not_sent
    if lines or not (failed or pending):
        with atomic_output(output) as out:
            out.write("".join(grade_line(g) for g in lines))
    log(f"{len(scored)} reports, {len(lines)} (report, nugget) grades"
        + (f" written to {output}" if output not in (None, "-") and (lines or not (failed or pending)) else "")
        + f"; {asker.stats.summary()}")
    if pending:
        log(f"{pending} windows wait for their answers (their requests are in the batch file): not written"
            + ("" if lines else " (nothing written)"))
    unparsed = sum(not g.parse_ok for g in lines)
    if unparsed:
        log(f"{unparsed} (report, nugget) pairs have no label after the re-asks (parse_ok false; "
            "they count as not_support; a rerun asks again)")
    detail = failure_line() if failed and failure_line is not None else None
    if detail:
        log(f"{failed} windows have no answer; their nuggets are not written" + ("" if lines else " (nothing written)")
            + f": {detail}")
    elif failed:
        # every call failed: an existing output stays as it was, none is created empty
        log(f"{failed} calls failed after the HTTP retries; their nuggets are not written: run again"
            + ("" if lines else " (nothing written)"))
        if asker.failure_summary():
            log(asker.failure_summary())
    return AssignResult(lines, failed, asker.stats, scored)
