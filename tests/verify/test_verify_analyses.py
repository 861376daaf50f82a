"""exam-verify grading / spurious / uncovered / grid.

Expected values come from direct recounts over the raw inputs (json/gzip on the
reference workbench file, plain loops on the small fixture), never from the module."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections import defaultdict

import pytest

from exam_eval.io.bank_items import make_item_id
from refusals import one_line_refusal

TAU = 4


# ---------------------------------------------------------------- small fixture

ITEMS = {"q1": ["What is A?", "What is B?", "What is C?"], "q2": ["Who made D?"]}
# (qid, doc, item index) -> grade (None = unparsed)
GRADES = {
    ("q1", "d1", 0): 5, ("q1", "d1", 1): 0, ("q1", "d1", 2): 4,
    ("q1", "d2", 0): 4, ("q1", "d2", 1): 4, ("q1", "d2", 2): 1,
    ("q1", "d3", 0): 2, ("q1", "d3", 1): 3, ("q1", "d3", 2): None,
    ("q1", "d4", 0): 4, ("q1", "d4", 1): 0, ("q1", "d4", 2): 0,
    ("q1", "d5", 0): 0, ("q1", "d5", 1): 0, ("q1", "d5", 2): 5,
    ("q2", "e1", 0): 1, ("q2", "e2", 0): 5, ("q2", "e3", 0): None,
}
QRELS = {("q1", "d1"): 2, ("q1", "d2"): 0, ("q1", "d3"): 3, ("q1", "d4"): 1, ("q1", "d5"): -1,
         ("q1", "d9"): 2, ("q2", "e1"): 1, ("q2", "e2"): 0, ("q2", "e3"): 2}
TEXTS = {("q1", f"d{i}"): f"passage text number {i}" for i in range(1, 6)}
TEXTS.update({("q2", f"e{i}"): f"another passage {i}" for i in range(1, 4)})


def item_id(qid, i):
    return make_item_id(qid, ITEMS[qid][i])


@pytest.fixture
def small(tmp_path):
    grades = tmp_path / "grades.jsonl"
    with open(grades, "w") as fh:
        # a stale line first: the later line for the same key must win
        fh.write(json.dumps({"query_id": "q1", "doc_id": "d1", "item_id": item_id("q1", 0), "kind": "question",
                             "grade": 0, "parse_ok": True, "answer": "old", "model": "m", "prompt": "p"}) + "\n")
        fh.writelines(json.dumps({"query_id": qid, "doc_id": doc, "item_id": item_id(qid, i), "kind": "question",
                                 "grade": g, "probs": None, "answer": "garbled" if g is None else f"ans {doc} {i}",
                                 "parse_ok": g is not None, "model": "m", "prompt": "p"}) + "\n" for (qid, doc, i), g in GRADES.items())
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {d} {l}\n" for (q, d), l in QRELS.items()))
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"query_id": q, "item_id": make_item_id(q, t), "kind": "question", "text": t})
                            + "\n" for q, ts in ITEMS.items() for t in ts))
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for (q, d), t in TEXTS.items()))
    return grades, qrels, bank, passages


def tsv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.mark.parametrize("relevant_min", [1, 2])
def test_spurious_small_matches_direct_count(small, run_cli, relevant_min):
    grades, qrels, _, _ = small
    r = run_cli("exam-verify", "spurious", grades, qrels, "--relevant-min", str(relevant_min), "--top", "0")
    assert r.returncode == 0, r.stderr
    got = {row["item_id"]: row for row in tsv_rows(r.stdout)}
    expected = {}
    for qid, texts in ITEMS.items():
        for i in range(len(texts)):
            nonrel = rel = unj = 0
            for (q, doc, j), g in GRADES.items():
                if q != qid or j != i or g is None or g < TAU:
                    continue
                label = QRELS.get((q, doc))
                if label is None:
                    unj += 1
                elif 0 <= label < relevant_min:
                    nonrel += 1
                elif label >= relevant_min:
                    rel += 1
            if nonrel:
                expected[item_id(qid, i)] = (nonrel, rel, unj)
    assert expected  # the fixture must exercise the analysis
    assert {k: (int(v["nonrel_hits"]), int(v["rel_hits"]), int(v["unjudged_hits"])) for k, v in got.items()} == expected
    # within a query, most non-relevant hits first
    q1 = [int(row["nonrel_hits"]) for row in tsv_rows(r.stdout) if row["query_id"] == "q1"]
    assert q1 == sorted(q1, reverse=True)


def test_spurious_text_uses_bank_and_top(small, run_cli):
    grades, qrels, bank, _ = small
    r = run_cli("exam-verify", "spurious", grades, qrels, "--bank", bank, "--top", "1", "--format", "text")
    assert r.returncode == 0, r.stderr
    # relevant_min 1: non-relevant = d2 (label 0); items 0 and 1 both reach 4 on d2 -> tie, smaller id first
    first = min(item_id("q1", 0), item_id("q1", 1))
    text = ITEMS["q1"][[item_id("q1", i) for i in range(3)].index(first)]
    assert f"(1) {text}" in r.stdout
    assert r.stdout.count("(1)") == 2  # q1 top-1 and q2 (e2 label 0 graded 5)


def test_uncovered_small(small, run_cli):
    grades, qrels, _, passages = small
    r = run_cli("exam-verify", "uncovered", grades, qrels, "--relevant-min", "2", "--passages", passages)
    assert r.returncode == 0, r.stderr
    rows = tsv_rows(r.stdout)
    expected = set()
    for (q, d), label in QRELS.items():
        if label < 2:
            continue
        gs = [g for (q2, d2, _), g in GRADES.items() if (q2, d2) == (q, d)]
        if gs and not any(g is not None and g >= TAU for g in gs):
            expected.add((q, d))
    assert {(row["query_id"], row["doc_id"]) for row in rows} == expected == {("q1", "d3"), ("q2", "e3")}
    by = {row["doc_id"]: row for row in rows}
    assert by["d3"]["max_grade"] == "3" and by["d3"]["passage_text"] == TEXTS[("q1", "d3")]
    assert by["e3"]["max_grade"] == "-"  # only an unparsed grade: never read as 0
    assert "1 relevant passages in 1 queries have no grades" in r.stderr  # d9


def test_grading_sorted_with_answers(small, run_cli):
    grades, qrels, bank, passages = small
    r = run_cli("exam-verify", "grading", grades, "--qrels", qrels, "--format", "tsv", "--passages", passages,
                "--bank", bank)
    assert r.returncode == 0, r.stderr
    rows = tsv_rows(r.stdout)
    assert len(rows) == len(GRADES)
    for qid, texts in ITEMS.items():
        for i, text in enumerate(texts):
            mine = [row for row in rows if row["item_id"] == item_id(qid, i)]
            expected = sorted(((g, d) for (q, d, j), g in GRADES.items() if q == qid and j == i),
                              key=lambda t: (t[0] is None, -(t[0] or 0), t[1]))
            assert [(row["grade"], row["doc_id"]) for row in mine] == \
                [("unparsed" if g is None else str(g), d) for g, d in expected]
            assert all(row["item_text"] == text for row in mine)
    d1 = next(row for row in rows if row["doc_id"] == "d1" and row["item_id"] == item_id("q1", 0))
    assert d1["answer"] == "ans d1 0"  # the last line for a key wins over the stale one
    assert d1["judgment"] == "2" and d1["passage_text"] == TEXTS[("q1", "d1")]


def test_grid_tsv_and_html(small, run_cli, tmp_path):
    grades, qrels, bank, passages = small
    r = run_cli("exam-verify", "grid", grades, "--qrels", qrels, "-q", "q1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.rstrip("\n").split("\n")
    header = lines[0].split("\t")
    assert header[:3] == ["query_id", "doc_id", "judgment"]
    for line in lines[1:]:
        cells = dict(zip(header, line.split("\t")))
        for i in range(3):
            g = GRADES[("q1", cells["doc_id"], i)]
            assert cells[item_id("q1", i)] == ("unparsed" if g is None else str(g))
    out = tmp_path / "grid.html"
    r = run_cli("exam-verify", "grid", grades, "--qrels", qrels, "--bank", bank, "--passages", passages,
                "--format", "html", "--answers", "-o", out)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "What is C?" in page and "passage text number 3" in page
    assert page.count('<td class="g-bad"') == 2  # the two unparsed grades


def test_bad_grades_line_exit_2_no_output(small, run_cli, tmp_path):
    grades, qrels, _, _ = small
    lines = grades.read_text().splitlines()
    lines.insert(3, '{"query_id": "q1", "doc_id": ')
    grades.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.tsv"
    r = run_cli("exam-verify", "spurious", grades, qrels, "-o", out)
    assert one_line_refusal(r).startswith(f"exam-verify: {grades}:4: invalid JSON")
    assert not out.exists() and not list(tmp_path.glob(".out.tsv*"))


def test_bad_qrels_and_wrong_bank(small, run_cli, tmp_path):
    grades, qrels, _, _ = small
    qrels.write_text("q1 0 d1 2\nq1 0 d2 x\n")
    r = run_cli("exam-verify", "uncovered", grades, qrels)
    assert r.returncode == 2 and f"{qrels}:2:" in r.stderr
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"query_id": "zz", "item_id": "zz/1", "kind": "question", "text": "Why?"}) + "\n")
    r = run_cli("exam-verify", "grading", grades, "--bank", other)
    assert r.returncode == 2 and "wrong bank" in r.stderr
    r = run_cli("exam-verify", "spurious", grades, str(tmp_path / "nope.txt"))
    assert r.returncode == 2 and "nope.txt: no such file" in r.stderr
    r = run_cli("exam-verify", "spurious", grades, qrels, "--relevant-min", "0")
    assert r.returncode == 1


# ------------------------------------------------------------ DL19 reference data


def raw_dl19(shared):
    """(qid, doc) -> {question_id: self_rating}, straight from the workbench file."""
    ratings = {}
    with gzip.open(shared / "dl19" / "graded-flan-t5-large.jsonl.gz", "rt") as fh:
        for line in fh:
            qid, paras = json.loads(line)
            for p in paras:
                r = {}
                for block in p.get("exam_grades") or []:
                    for s in block["self_ratings"]:
                        r[s["question_id"]] = s["self_rating"]
                ratings[(qid, p["paragraph_id"])] = r
    qrels = {}
    with open(shared / "dl19" / "qrels.txt") as fh:
        for line in fh:
            q, _, d, label = line.split()
            qrels[(q, d)] = int(label)
    return ratings, qrels


@pytest.fixture(scope="module")
def dl19_raw(shared_data):
    return raw_dl19(shared_data)


def test_dl19_spurious_recount(shared_data, dl19_raw, run_cli):
    ratings, qrels = dl19_raw
    d = shared_data / "dl19"
    r = run_cli("exam-verify", "spurious", d / "graded-flan-t5-large.jsonl.gz", d / "qrels.txt",
                "--relevant-min", "2", "--top", "0", "--bank", d / "banks" / "questions-genq-oldformat.jsonl.gz")
    assert r.returncode == 0, r.stderr
    rows = tsv_rows(r.stdout)
    assert len(rows) > 50
    # independent recount for every listed item and for the items not listed
    nonrel = defaultdict(int)
    rel = defaultdict(int)
    for (q, doc), rs in ratings.items():
        label = qrels.get((q, doc))
        for item, g in rs.items():
            if g >= TAU and label is not None:
                (rel if label >= 2 else nonrel)[item] += 1
    assert {row["item_id"]: int(row["nonrel_hits"]) for row in rows} == {k: v for k, v in nonrel.items() if v}
    assert {row["item_id"]: int(row["rel_hits"]) for row in rows} == {k: rel[k] for k, v in nonrel.items() if v}
    # the worst item overall, with its bank text
    worst = max(rows, key=lambda row: int(row["nonrel_hits"]))
    assert int(worst["nonrel_hits"]) == max(nonrel.values())
    with gzip.open(d / "banks" / "questions-genq-oldformat.jsonl.gz", "rt") as fh:
        texts = {q["question_id"]: q["question_text"] for line in fh for q in json.loads(line)["questions"]}
    assert worst["item_text"] == texts[worst["item_id"]]


def test_dl19_uncovered_recount(shared_data, dl19_raw, run_cli):
    ratings, qrels = dl19_raw
    d = shared_data / "dl19"
    r = run_cli("exam-verify", "uncovered", d / "graded-flan-t5-large.jsonl.gz", d / "qrels.txt",
                "--relevant-min", "2")
    assert r.returncode == 0, r.stderr
    rows = tsv_rows(r.stdout)
    expected = {key for key, label in qrels.items()
                if label >= 2 and ratings.get(key) and max(ratings[key].values()) < TAU}
    assert len(expected) > 100
    assert {(row["query_id"], row["doc_id"]) for row in rows} == expected
    for row in rows[:20]:
        key = (row["query_id"], row["doc_id"])
        assert int(row["max_grade"]) == max(ratings[key].values())
        assert int(row["judgment"]) == qrels[key]
        assert row["passage_text"]  # embedded texts of the workbench file


def test_grading_with_extraction_answers(small, run_cli):
    grades, *_ = small
    # an extraction prompt graded the same pairs: its answers are what a human reads
    with open(grades, "a") as fh:
        fh.writelines(json.dumps({"query_id": qid, "doc_id": doc, "item_id": item_id(qid, i), "kind": "question",
                                 "grade": 1, "parse_ok": True, "answer": f"span {doc}/{i}", "model": "m",
                                 "prompt": "x"}) + "\n" for (qid, doc, i), g in GRADES.items())
    r = run_cli("exam-verify", "grading", grades)
    assert r.returncode == 1 and "several graders" in r.stderr and "'x'" in r.stderr
    r = run_cli("exam-verify", "grading", grades, "--prompt", "p", "--extraction-prompt", "x", "--format", "tsv")
    assert r.returncode == 0, r.stderr
    rows = tsv_rows(r.stdout)
    assert len(rows) == len(GRADES)
    for row in rows:
        i = [item_id(row["query_id"], j) for j in range(len(ITEMS[row["query_id"]]))].index(row["item_id"])
        g = GRADES[(row["query_id"], row["doc_id"], i)]
        assert row["extracted_answer"] == f"span {row['doc_id']}/{i}"
        assert row["grade"] == ("unparsed" if g is None else str(g))  # grades still from prompt p
    r = run_cli("exam-verify", "grid", grades, "--prompt", "p", "--extraction-prompt", "x", "--answers", "-q", "q2")
    assert r.returncode == 0, r.stderr
    header, *lines = r.stdout.strip().split("\n")
    assert header.split("\t")[4] == item_id("q2", 0) + ":answer"
    assert {line.split("\t")[4] for line in lines} == {"span e1/0", "span e2/0", "span e3/0"}


def test_help_imports_no_heavy_libraries():
    import subprocess
    import sys

    code = ("import sys\nfrom exam_eval.commands.verify import main\n"
            "for argv in (['--help'], ['report', '--help'], ['grid', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('torch', 'transformers', 'matplotlib', 'sentence_transformers')"
            " if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
    assert "Exit status" in r.stdout and "--official-column" in r.stdout
