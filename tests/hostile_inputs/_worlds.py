"""Small worlds the hostile-input tests share: lines of each input kind to break one field
of, little collections of a query or two to run a command on, and ``refused``, the check
that a refusal names the bad file and line. Imported as
``from tests.hostile_inputs._worlds import ...``."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from refusals import one_line_refusal

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
DEEP = "[" * 200_000 + "]" * 200_000
DEEP_OBJ = '{"a": ' * 200_000 + "1" + "}" * 200_000


# ---- single lines on the demo's query 101, one field changed by keyword ---------------------

def grade_json(**kw) -> str:
    g = {"query_id": "101", "doc_id": "p064", "item_id": "101/x", "kind": "question", "grade": 4, "probs": None,
         "answer": "4", "parse_ok": True, "model": "m", "prompt": "question-selfrating", "prompt_hash": None}
    g.update(kw)
    return json.dumps(g)


def report_json(md=None, sentences=None, references=None) -> str:
    return json.dumps({"metadata": md if md is not None else {"run_id": "r", "topic_id": "101", "team_id": "t"},
                       "responses": sentences if sentences is not None else [{"text": "Bees.", "citations": ["p064"]}],
                       "references": references if references is not None else ["p064"]})


def item_json(**kw) -> str:
    return json.dumps({"query_id": "101", "item_id": "101/x", "kind": "nugget", "text": "bees make honey"} | kw)


def write(path: Path, lines, raw: bytes | None = None) -> Path:
    path.write_bytes(raw if raw is not None else "".join(line + "\n" for line in lines).encode("utf-8"))
    return path


def refused(res, path: Path, line: int | bool | None, *cause: str) -> str:
    """One clean line on stderr, exit 2, naming PATH[:LINE] and CAUSE (line True: some
    line)."""
    last = one_line_refusal(res)
    assert last.isprintable(), last
    if line is True:
        assert re.search(re.escape(f"{path}:") + r"\d+: ", last), (path, last)
    else:
        where = f"{path}:{line}: " if line is not None else f"{path}: "
        assert where in last, (where, last)
    for c in cause:
        assert c in last, (c, last)
    return last


def grade_obj(qid, doc, item, grade, parse_ok=True):
    return {"query_id": qid, "doc_id": doc, "item_id": item, "kind": "question", "grade": grade, "probs": None,
            "answer": str(grade), "parse_ok": parse_ok, "model": "m", "prompt": "question-selfrating",
            "prompt_hash": None}


def write_jsonl(path: Path, objs) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def report_line(run_id: str, sentences: list[dict], **extra) -> str:
    return json.dumps({"metadata": {"team_id": "t", "run_id": run_id, "topic_id": "101", "narrative_id": "101"},
                       "answer": sentences, **extra}) + "\n"


# ---- exam-grade on the demo collection -----------------------------------------------------

DEMO_GRADE = ["grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
              "--passages", DEMO / "passages.jsonl", "-k", "1", DEMO / "good.run", "--no-cache"]


# ---- one query, one question, one passage --------------------------------------------------

def scripted_grading_args(tmp_path: Path, answer: str = "4") -> list:
    """exam-grade's arguments (all but -o) for one question on one passage of one run line
    (tmp_path/r.run), the scripted model answering ANSWER."""
    from exam_eval.io.bank_items import make_item_id

    bank = tmp_path / "bank.jsonl"
    text = "What do bees collect?"
    bank.write_text(json.dumps({"query_id": "101", "item_id": make_item_id("101", text), "kind": "question",
                                "text": text}) + "\n")
    passages = tmp_path / "passages.jsonl"
    passages.write_text(json.dumps({"doc_id": "d1", "text": "Bees collect nectar."}) + "\n")
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"match": ["What do bees collect?"], "output": answer}) + "\n")
    good = tmp_path / "r.run"
    good.write_text("101 Q0 d1 1 2.0 r\n")
    return ["--backend", "scripted", "-O", f"script={script}", "--prompt", "question-selfrating",
            "--generate-ratings", "--no-cache", "--bank", bank, "--passages", passages, good]


RUN_LINES = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 1.0 r\n"


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    """Three documents of query q1 (import the fixture where it is used)."""
    p = tmp_path / "r.run"
    p.write_text(RUN_LINES)
    return p


def grades_file(tmp_path: Path, parsed: bool = True, item: bool = True) -> Path:
    """question-selfrating grades 1..3 of q1's d1..d3 (parsed or not, of item q1/i1 or none)."""
    from exam_eval.io.grades import Grade, grade_line

    p = tmp_path / "grades.jsonl"
    p.write_text("".join(grade_line(Grade(query_id="q1", doc_id=f"d{i}", item_id="q1/i1" if item else None,
                                          kind="question" if item else None, grade=i if parsed else None,
                                          probs=None, answer=str(i), parse_ok=parsed, model="m",
                                          prompt="question-selfrating"))
                         for i in range(1, 4)))
    return p


def grade_args_without_run(tmp_path: Path) -> list:
    """exam-grade's scripted back end, a bank of one question of q1, one passage d1."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}\n')
    passages = tmp_path / "p.jsonl"
    passages.write_text('{"doc_id": "d1", "text": "Bees."}\n')
    return ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", bank, "--passages", passages,
            "--no-cache"]


# ---- reports of three runs on one nugget ---------------------------------------------------

def md5(s: str) -> str:
    return hashlib.md5(s.encode()).hexdigest()


def nugget_world(tmp_path: Path, runs=(("runA", 2), ("runB", 1), ("runC", 0))) -> dict[str, Path]:
    """One topic, one nugget, one report per run, and the nugget's assign grades."""
    t, s = "Nugget one.", "Sentence A one."
    (tmp_path / "bank.jsonl").write_text(json.dumps({"query_id": "101", "item_id": f"101/{md5(t)}",
                                                     "kind": "nugget", "text": t, "importance": "vital"}) + "\n")
    reports, grades = [], []
    for run_id, grade in runs:
        reports.append(json.dumps({"metadata": {"team_id": "t", "run_id": run_id, "topic_id": "101"},
                                   "responses": [{"text": s, "citations": []}], "references": []}))
        grades.append(json.dumps({"query_id": "101", "doc_id": f"{run_id}/101/1-{md5(s)[:10]}",
                                  "item_id": f"101/{md5(t)}", "kind": "nugget", "grade": grade, "probs": None,
                                  "answer": str(grade), "parse_ok": True, "model": "m",
                                  "prompt": "nuggetizer-assign", "prompt_hash": "h"}))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "r.jsonl").write_text("\n".join(reports) + "\n")
    (tmp_path / "grades.jsonl").write_text("\n".join(grades) + "\n")
    return {"bank": tmp_path / "bank.jsonl", "reports": tmp_path / "reports", "grades": tmp_path / "grades.jsonl"}


# ---- one bad file among good ones, in a real process -----------------------------------------

GOOD_QRELS = "1 0 a 1\n1 0 b 0\n2 0 c 2\n"
GOOD_RUN = "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n2 Q0 c 1 1.0 t\n"


def located_grade(**kw):
    g = {"query_id": "1", "doc_id": "a", "item_id": "1/x", "kind": "question", "grade": 4, "probs": None,
         "answer": "4", "parse_ok": True, "model": "m", "prompt": "p", "prompt_hash": None}
    g.update(kw)
    return json.dumps(g)


GOOD_GRADES = located_grade() + "\n" + located_grade(doc_id="b", grade=1) + "\n"


def refused_located(tmp_path: Path, run_cli, case) -> None:
    """CASE: (name, command, which file is bad, its content, expected "file:line" suffix or
    None, message part). The command reads the bad file among good ones (GOOD_QRELS,
    GOOD_RUN, GOOD_GRADES): one line naming file and line, exit 2, no traceback, no output
    file and no temp file left."""
    name, prog, bad, content, where, message = case
    files = {"qrels": GOOD_QRELS, "run": GOOD_RUN, "grades": GOOD_GRADES}
    paths = {}
    for key, text in files.items():
        paths[key] = tmp_path / f"{key}.txt"
        paths[key].write_text(text)
    bad_key = bad.split(".")[0]
    bad_path = tmp_path / (f"bad-{bad}" if "." in bad else f"bad-{bad}.txt")
    bad_path.write_bytes(content if isinstance(content, bytes) else content.encode())
    paths[bad_key] = bad_path
    out = tmp_path / "out.tsv"
    if prog == "exam-qrels":
        labels = paths["grades"] if bad_key == "grades" else paths["qrels"]
        args = ["-m", "map", labels, paths["run"], "-o", out]
    else:
        args = [paths["grades"], paths["run"], "-o", out]
        if bad_key == "bank":
            args = ["--bank", paths["bank"], *args]
    res = run_cli(prog, *args)
    err = one_line_refusal(res, prog)
    assert str(paths[bad_key]) in err
    if where:
        assert f"{paths[bad_key]}{where}" in err
    if message:
        assert message in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tsv")], "temp file left behind"
