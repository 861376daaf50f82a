"""Bad input: one line naming file and line, exit 2, no traceback, no output file."""

from __future__ import annotations

import gzip
import json

import pytest

GOOD_QRELS = "1 0 a 1\n1 0 b 0\n2 0 c 2\n"
GOOD_RUN = "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n2 Q0 c 1 1.0 t\n"


def grade(**kw):
    g = {"query_id": "1", "doc_id": "a", "item_id": "1/x", "kind": "question", "grade": 4, "probs": None,
         "answer": "4", "parse_ok": True, "model": "m", "prompt": "p", "prompt_hash": None}
    g.update(kw)
    return json.dumps(g)


GOOD_GRADES = grade() + "\n" + grade(doc_id="b", grade=1) + "\n"

# (name, command, which file is bad, its content, expected "file:line" suffix or None, message part)
CASES = [
    ("qrels 3 fields", "exam-qrels", "qrels", GOOD_QRELS + "2 0 d\n", ":4:", "expected 4 fields"),
    ("qrels 5 fields", "exam-qrels", "qrels", "1 0 a 1 x\n", ":1:", "expected 4 fields"),
    ("qrels float label", "exam-qrels", "qrels", GOOD_QRELS + "3 0 e 1.5\n", ":4:", "not an integer"),
    ("qrels word label", "exam-qrels", "qrels", "1 0 a rel\n", ":1:", "not an integer"),
    ("qrels duplicate", "exam-qrels", "qrels", GOOD_QRELS + "1 0 a 0\n", ":4:", "first on line 1"),
    ("qrels empty", "exam-qrels", "qrels", "", None, "empty"),
    ("qrels blank line", "exam-qrels", "qrels", GOOD_QRELS + "\n", ":4:", "blank line"),
    ("run 5 fields", "exam-qrels", "run", GOOD_RUN + "2 Q0 d 2 1.0\n", ":4:", "expected 6 fields"),
    ("run bad score", "exam-qrels", "run", "1 Q0 a 1 high t\n", ":1:", "not a number"),
    ("run nan score", "exam-qrels", "run", GOOD_RUN + "2 Q0 e 3 nan t\n", ":4:", "not finite"),
    ("run inf score", "exam-qrels", "run", "1 Q0 a 1 inf t\n", ":1:", "not finite"),
    ("run duplicate", "exam-qrels", "run", GOOD_RUN + "1 Q0 a 9 0.5 t\n", ":4:", "first on line 1"),
    ("run empty", "exam-qrels", "run", "", None, "empty"),
    ("run no common query", "exam-qrels", "run", "9 Q0 a 1 1.0 t\n", None, "no queries in common"),
    ("grades bad json", "exam-qrels", "grades", GOOD_GRADES + "{not json\n", ":3:", "invalid JSON"),
    ("grades missing field", "exam-qrels", "grades", GOOD_GRADES + json.dumps({"query_id": "1"}) + "\n", ":3:", "missing field"),
    ("grades float grade", "exam-qrels", "grades", grade(grade=3.5) + "\n", ":1:", "'grade' must be an integer"),
    ("grades null but ok", "exam-qrels", "grades", GOOD_GRADES + grade(grade=None) + "\n", ":3:", "null"),
    ("grades bad probs", "exam-qrels", "grades", grade(probs=[0.1]) + "\n", ":1:", "'probs'"),
    ("grades scalar line", "exam-qrels", "grades", GOOD_GRADES + "[1]\n", ":3:", "workbench line"),
    ("cover grades bad json", "exam-cover", "grades", "{\n", ":1:", "invalid JSON"),
    ("cover run bad score", "exam-cover", "run", GOOD_RUN + "2 Q0 x 2 1,0 t\n", ":4:", "not a number"),
    ("cover run duplicate", "exam-cover", "run", "1 Q0 a 1 1 t\n1 Q0 a 2 1 t\n", ":2:", "duplicate"),
    # fields after the sixth are ignored (as trec_eval does), so five is the bad count
    ("cover run 5 fields", "exam-cover", "run", GOOD_RUN + "2 Q0 c 1 1.0\n", ":4:", "expected 6 fields"),
    ("cover bank bad kind", "exam-cover", "bank", json.dumps({"query_id": "1", "item_id": "1/x", "kind": "essay", "text": "q?"}) + "\n", ":1:", "kind must be"),
    ("cover bank empty text", "exam-cover", "bank", json.dumps({"query_id": "1", "item_id": "1/x", "kind": "question", "text": " "}) + "\n", ":1:", "empty item text"),
    ("cover run not utf8", "exam-cover", "run", b"1 Q0 \xff\xfe 1 1 t\n", ":1:", "UTF-8"),
    ("cover grades truncated gzip", "exam-cover", "grades.gz", gzip.compress(GOOD_GRADES.encode())[:-12], None, "cannot read"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_located(tmp_path, run_cli, case):
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
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    err = res.stderr.strip()
    assert "Traceback" not in res.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith(prog + ": ")
    assert str(paths[bad_key]) in err
    if where:
        assert f"{paths[bad_key]}{where}" in err
    if message:
        assert message in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tsv")], "temp file left behind"


def test_usage_errors_exit_1(tmp_path, run_cli):
    q = tmp_path / "q.txt"
    q.write_text(GOOD_QRELS)
    r = tmp_path / "r.txt"
    r.write_text(GOOD_RUN)
    for args in (["-m", "nonsense", q, r], ["-m", "P.0", q, r], ["-m", "P.5,5", q, r], ["--bogus", q],
                 ["-q", q, r, r]):
        res = run_cli("exam-qrels", *args)
        assert res.returncode == 1, (args, res.stderr)
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_missing_file_and_unknown_dataset(tmp_path, run_cli):
    res = run_cli("exam-qrels", tmp_path / "nope.txt")
    assert res.returncode == 2 and "no such file" in res.stderr
    res = run_cli("exam-cover", tmp_path / "nope.jsonl", tmp_path / "r")
    assert res.returncode == 2 and "nope.jsonl" in res.stderr


def test_several_graders_must_be_chosen(tmp_path, run_cli):
    g = tmp_path / "g.jsonl"
    g.write_text(grade() + "\n" + grade(model="other") + "\n")
    res = run_cli("exam-qrels", g)
    assert res.returncode == 1 and "--model 'm'" in res.stderr and "--model 'other'" in res.stderr
    ok = run_cli("exam-qrels", "--model", "other", g)
    assert ok.returncode == 0 and ok.stdout == "1 0 a 4\n"


def test_unparsed_grades_are_reported_not_counted(tmp_path, run_cli):
    g = tmp_path / "g.jsonl"
    g.write_text(grade(grade=None, parse_ok=False) + "\n" + grade(doc_id="b", grade=5) + "\n")
    r = tmp_path / "r.txt"
    r.write_text("1 Q0 a 1 2.0 t\n")
    res = run_cli("exam-cover", g, r)
    assert res.returncode == 0
    assert "1 unparsed grades" in res.stderr
    assert "exam_cover            \tall\t0.0000" in res.stdout   # a's only grade is unparsed
    labels = run_cli("exam-qrels", g)
    assert labels.stdout == "1 0 b 5\n" and "1 passages had no parsed grade" in labels.stderr


def test_qrels_bank_drops_grades_of_deleted_items(tmp_path, run_cli):
    g = tmp_path / "g.jsonl"
    g.write_text(grade(item_id="1/old", grade=5) + "\n" + grade(item_id="1/new", grade=2) + "\n")
    bank = tmp_path / "b.jsonl"
    bank.write_text(json.dumps({"query_id": "1", "item_id": "1/new", "kind": "question", "text": "q?"}) + "\n")
    assert run_cli("exam-qrels", g).stdout == "1 0 a 5\n"
    res = run_cli("exam-qrels", "--bank", bank, g)
    assert res.returncode == 0 and res.stdout == "1 0 a 2\n"
    assert "1 grades of items not in the bank left out" in res.stderr
