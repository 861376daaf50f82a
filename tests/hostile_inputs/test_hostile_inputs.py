"""Issue 21's hostile inputs, one by one: each ends in one line naming file, the right
line and the real cause, exit 2 (or in the correct result), never a traceback; values no
producer writes are refused. The seeded fuzz of every reader is test_fuzz_inputs.py."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest

from exam_eval.errors import InputError
from inproc import run

DEMO = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"
DEEP = "[" * 200_000 + "]" * 200_000
DEEP_OBJ = '{"a": ' * 200_000 + "1" + "}" * 200_000


def grade(**kw) -> str:
    g = {"query_id": "101", "doc_id": "p064", "item_id": "101/x", "kind": "question", "grade": 4, "probs": None,
         "answer": "4", "parse_ok": True, "model": "m", "prompt": "question-selfrating", "prompt_hash": None}
    g.update(kw)
    return json.dumps(g)


def report(md=None, sentences=None, references=None) -> str:
    return json.dumps({"metadata": md if md is not None else {"run_id": "r", "topic_id": "101", "team_id": "t"},
                       "responses": sentences if sentences is not None else [{"text": "Bees.", "citations": ["p064"]}],
                       "references": references if references is not None else ["p064"]})


def item(**kw) -> str:
    return json.dumps({"query_id": "101", "item_id": "101/x", "kind": "nugget", "text": "bees make honey"} | kw)


def write(path: Path, lines, raw: bytes | None = None) -> Path:
    path.write_bytes(raw if raw is not None else "".join(line + "\n" for line in lines).encode("utf-8"))
    return path


def refused(res, path: Path, line: int | bool | None, *cause: str) -> str:
    """One clean line on stderr (after any notices), exit 2, naming PATH[:LINE] and CAUSE
    (line True: some line)."""
    assert res.escaped is None, res.escaped
    assert res.code == 2, (res.code, res.stderr)
    last = res.last_line
    assert last.isprintable(), last
    if line is True:
        assert re.search(re.escape(f"{path}:") + r"\d+: ", last), (path, last)
    else:
        where = f"{path}:{line}: " if line is not None else f"{path}: "
        assert where in last, (where, last)
    for c in cause:
        assert c in last, (c, last)
    return last


# ---------------------------------------------------------------- 1. no traceback, whatever the input

@pytest.mark.parametrize("nest", [DEEP, DEEP_OBJ], ids=["array", "object"])
def test_deep_nesting_in_every_json_reader(tmp_path, nest):
    g = write(tmp_path / "g.jsonl", [grade(), nest])
    refused(run("qrels", g), g, 2, "nested deeper than")
    refused(run("cover", g, DEMO / "good.run"), g, 2, "nested deeper than")
    b = write(tmp_path / "b.jsonl", [item(), item(item_id="101/y", text="other"), nest])
    refused(run("nuggets", "bank", "--to", "ours", b), b, 3, "nested deeper than")
    refused(run("cover", "--bank", b, write(tmp_path / "ok.jsonl", [grade()]), DEMO / "good.run"), b, 3)
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [nest])
    refused(run("nuggets", "score", "--reports", r, "--bank", b, g), r, 1, "nested deeper than")
    refused(run("grade", "--dry-run", "--backend", "scripted", "--prompt", "umbrela", "--no-cache",
                "--topics", DEMO / "topics.tsv", "--reports", tmp_path / "runs"), r, 1, "nested deeper than")
    t = write(tmp_path / "topics.jsonl", [json.dumps({"query_id": "101", "text": "bees"}), nest])
    refused(run("nuggets", "bank", "--to", "nuggetizer", "--topics", t, DEMO / "nuggets.jsonl"), t, 2)
    p = write(tmp_path / "p.jsonl", [json.dumps({"doc_id": "p064", "text": "bees"}), nest])
    refused(run("grade", "--dry-run", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache",
                "--bank", DEMO / "questions.jsonl", "--passages", p, DEMO / "good.run"), p, 2, "nested deeper than")


def test_lone_surrogates_are_refused_where_they_are_read(tmp_path):
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [report(), report(sentences=[{"text": "a \\ud800 b", "citations": []}],
                                                               md={"run_id": "r2", "topic_id": "101", "team_id": "t"})])
    r.write_text(r.read_text().replace("\\\\ud800", "\\ud800"))  # the escape itself, as a file holds it
    b = write(tmp_path / "b.jsonl", [item()])
    last = refused(run("nuggets", "score", "--reports", r, "--bank", b, write(tmp_path / "g.jsonl", [grade()])),
                   r, 2, "lone surrogate \\ud800", "responses[0].text")
    assert "\ud800" not in last
    bank = write(tmp_path / "bank.jsonl", [item(), item(item_id=None, text="x \\udfff")])
    bank.write_text(bank.read_text().replace("\\\\udfff", "\\udfff"))
    refused(run("nuggets", "bank", "--to", "nuggetizer", bank), bank, 2, "lone surrogate \\udfff", "text")
    g = write(tmp_path / "grades.jsonl", [grade(), grade(doc_id="p\\ud801")])
    g.write_text(g.read_text().replace("\\\\ud801", "\\ud801"))
    refused(run("qrels", g), g, 2, "lone surrogate", "doc_id")
    # a correct pair is text, not a surrogate
    ok = write(tmp_path / "pair.jsonl", [item(item_id=None, text="bee \\ud83d\\udc1d")])
    ok.write_text(ok.read_text().replace("\\\\u", "\\u"))
    res = run("nuggets", "bank", "--to", "ours", ok)
    assert res.code == 0 and "bee \U0001f41d" in res.stdout, res.stderr


def test_surrogate_in_a_real_process_is_one_line(tmp_path, run_cli):
    """Where it used to end in UnicodeEncodeError: writing the converted bank."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text(item(text="honey \\ud800").replace("\\\\", "\\") + "\n")
    res = run_cli("exam-nuggets", "bank", "--to", "ours", bank)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [f"exam-nuggets: {bank}:1: lone surrogate \\ud800 in the string at "
                                               "text (an escaped half of a UTF-16 pair is not text)"]


def test_nul_bom_crlf_huge_lines_and_broken_gzip(tmp_path):
    qrels, good = DEMO / "qrels.txt", DEMO / "good.run"
    expected = run("qrels", "-m", "map", qrels, good)
    assert expected.code == 0
    text = good.read_bytes()
    for name, data in (("bom", b"\xef\xbb\xbf" + text), ("crlf", text.replace(b"\n", b"\r\n"))):
        p = write(tmp_path / f"{name}.run", None, data)
        res = run("qrels", "-m", "map", qrels, p)
        assert (res.code, res.stdout) == (0, expected.stdout), (name, res.stderr)
    lines = text.split(b"\n")
    nul = write(tmp_path / "nul.run", None, b"\n".join(lines[:4] + [lines[4].replace(b"Q0", b"Q\x000")] + lines[5:]))
    refused(run("qrels", "-m", "map", qrels, nul), nul, 5, "NUL byte")
    huge = write(tmp_path / "huge.run", None, text + b"101 Q0 " + b"p" * 3_000_000 + b" 1 1 t\n")
    res = run("qrels", "-m", "map", qrels, huge)
    assert res.escaped is None and res.code == 0  # a long docno is a docno
    g = "".join(grade(doc_id=f"p{i:03d}") + "\n" for i in range(200)).encode()
    trunc = write(tmp_path / "t.jsonl.gz", None, gzip.compress(g)[:-40])
    refused(run("qrels", trunc), trunc, True, "cannot read", "truncated or corrupt gzip")
    z = bytearray(gzip.compress(g))
    z[len(z) // 2] ^= 0x10
    flipped = write(tmp_path / "f.jsonl.gz", None, bytes(z))
    res = run("qrels", flipped)
    assert res.escaped is None and res.code == 2 and str(flipped) in res.last_line, res.stderr


def test_wrong_json_types_name_the_field(tmp_path):
    g = write(tmp_path / "g.jsonl", [grade(), grade(query_id=["101"])])
    refused(run("qrels", g), g, 2, "'query_id' must be a string", "list")
    g = write(tmp_path / "g2.jsonl", [grade(doc_id="p 064")])
    refused(run("qrels", g), g, 1, "white space")
    g = write(tmp_path / "g3.jsonl", [grade(model=5)])
    refused(run("qrels", g), g, 1, "'model' must be a non-empty string")
    g = write(tmp_path / "g4.jsonl", [grade(probs={"4": 1.5})])
    refused(run("qrels", g), g, 1, "'probs'", "0 to 1")
    wb = write(tmp_path / "wb.jsonl", [json.dumps(["101", [{"paragraph_id": "p1", "exam_grades": [5]}]])])
    refused(run("qrels", wb), wb, 1, "'exam_grades' must be a list of objects")
    b = write(tmp_path / "b.jsonl", [item(query_id={"q": 1})])
    refused(run("nuggets", "bank", "--to", "ours", b), b, 1, "'query_id' must be a string")


def test_labels_and_scores_no_trec_file_holds(tmp_path):
    """A label of 2*10^9 took pytrec_eval 15 GB, one of 10^6 minutes of nDCG; 10^20
    overflowed its C int. Python alone reads 1_0 as 10 and Arabic-Indic digits."""
    for i, label in enumerate(["99999999999999999999", "2000000000", "10001", "-10001"]):
        q = write(tmp_path / f"q{i}.txt", ["101 0 p064 1", f"101 0 p092 {label}"])
        refused(run("qrels", "-m", "ndcg", q, DEMO / "good.run"), q, 2, "out of range")
    q = write(tmp_path / "ok.txt", ["101 0 p064 10000", "101 0 p092 -10000"])
    assert run("qrels", "-m", "ndcg", q, DEMO / "good.run").code == 0
    for i, label in enumerate(["1_0", "\u0661"]):
        q = write(tmp_path / f"u{i}.txt", ["101 0 p064 1", f"101 0 p092 {json.loads(chr(34) + label + chr(34))}"])
        refused(run("qrels", "-m", "map", q, DEMO / "good.run"), q, 2, "is not an integer")
    r = write(tmp_path / "r.run", ["101 Q0 p064 1 2_0 t"])
    refused(run("qrels", "-m", "map", DEMO / "qrels.txt", r), r, 1, "is not a number")
    g = write(tmp_path / "g.jsonl", [grade(prompt="file:custom", grade=2_000_000_000)])
    refused(run("qrels", g), g, 1, "out of range")


# ---------------------------------------------------------------- 2. values no producer writes

def test_grade_outside_the_prompts_scale_is_refused(tmp_path):
    g = write(tmp_path / "g.jsonl", [grade(), grade(doc_id="p092", grade=9)])
    for argv in (["qrels", g], ["cover", g, DEMO / "good.run"]):
        refused(run(*argv), g, 2, "grade 9 is outside the 0-5 scale of prompt question-selfrating")
    g = write(tmp_path / "umb.jsonl", [grade(prompt="umbrela", item_id=None, kind=None, grade=4)])
    refused(run("qrels", g), g, 1, "0-3 scale of prompt umbrela")
    ok = write(tmp_path / "custom.jsonl", [grade(prompt="file:my.prompt", grade=9)])  # scale unknown here
    assert run("qrels", ok).code == 0
    wb = write(tmp_path / "wb.jsonl", [json.dumps(["101", [{"paragraph_id": "p1", "exam_grades": [
        {"llm": "flan", "prompt_info": {"prompt_class": "QuestionSelfRatedUnanswerablePromptWithChoices"},
         "self_ratings": [{"question_id": "101/x", "self_rating": 7}]}]}]])])
    refused(run("qrels", wb), wb, 1, "grade 7 is outside the 0-5 scale of the workbench's self-ratings")


@pytest.mark.parametrize("cites", [[True], [0, False], {"p064": True}], ids=["true", "false", "confidence"])
def test_boolean_citations_are_refused(tmp_path, cites):
    r = write(tmp_path / "r.jsonl", [report(sentences=[{"text": "Bees.", "citations": cites}])])
    b = write(tmp_path / "b.jsonl", [item()])
    refused(run("nuggets", "score", "--reports", r, "--bank", b, write(tmp_path / "g.jsonl", [grade()])), r, 1,
            "responses[0].citations holds true/false")


def test_duplicate_item_ids(tmp_path):
    """Decided: an exact repeat (same query, id and text) is dropped with a notice by every
    command that reads a bank; the same id for another text is an error naming both lines;
    ids are unique per query (AutoJudge ids are md5(text), without the query)."""
    g = write(tmp_path / "g.jsonl", [grade(kind="nugget", prompt="nugget-selfrating")])
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [report()])
    exact = write(tmp_path / "exact.jsonl", [item(), item(importance="vital")])
    for argv in (["nuggets", "bank", "--to", "ours", exact],
                 ["nuggets", "score", "--reports", r, "--bank", exact, g],
                 ["grade", "--dry-run", "--backend", "scripted", "--prompt", "nugget-selfrating", "--no-cache",
                  "--bank", exact, "--reports", r]):
        res = run(*argv)
        assert res.code == 0 and res.escaped is None, (argv, res.stderr)
        assert f"{exact}: 1 exact repeats of an item (same query, id and text) dropped; e.g. line 2: 101/x" \
            in res.stderr, (argv[0], res.stderr)
    other = write(tmp_path / "other.jsonl", [item(), item(text="another text")])
    for argv in (["nuggets", "bank", "--to", "ours", other], ["nuggets", "score", "--reports", r, "--bank", other, g]):
        refused(run(*argv), other, 2, "item_id 101/x of query 101 already used for another text on line 1")
    aj = write(tmp_path / "aj.jsonl", [json.dumps({"query_id": q, "claim_bank": {"c": {"claim": "bees", "claim_id": "c1"}}})
                                       for q in ("101", "102")])
    res = run("nuggets", "bank", "--to", "ours", aj)
    assert res.code == 0 and [json.loads(x)["query_id"] for x in res.stdout.splitlines()] == ["101", "102"]


def test_non_finite_confidences_from_python_callers():
    from exam_eval.api import as_reports

    for bad in (math.nan, math.inf, "nan"):
        with pytest.raises(InputError, match="NaN and infinities are not allowed"):
            as_reports([json.loads(report(sentences=[{"text": "a", "citations": {"p064": 0.5}}]))
                        | {"responses": [{"text": "a", "citations": {"p064": bad}}]}])


# ---------------------------------------------------------------- 3. the right details

def test_invalid_utf8_is_reported_on_its_line(tmp_path):
    g = write(tmp_path / "g.jsonl", None, (grade() + "\n" + grade(doc_id="p092") + "\n").encode()
              + b'{"query_id": "\xff"}\n')
    refused(run("qrels", g), g, 3, "not UTF-8 text")
    q = write(tmp_path / "q.txt", None, b"101 0 p064 1\n101 0 p092 1\n101 0 p\xc3 1\n")
    refused(run("qrels", "-m", "map", q, DEMO / "good.run"), q, 3, "not UTF-8 text")


def test_report_messages_say_what_is_missing(tmp_path):
    b = write(tmp_path / "b.jsonl", [item()])
    g = write(tmp_path / "g.jsonl", [grade()])
    cases = [
        (report(md={"topic_id": "101", "team_id": "t"}), "missing metadata.run_id"),
        ('"good"', "expected a JSON object (one report per line: metadata, responses or answer, references)"),
        (report(sentences=[{"text": "a", "citations": {"p064": "NaN"}}]), "confidence \"NaN\": NaN and infinities"),
        ('{"metadata": {"run_id": "r", "topic_id": "1", "team_id": "t"}, '
         '"responses": [{"text": "a", "citations": {"d": NaN}}]}', "NaN is not allowed in JSON"),
    ]
    for i, (line, cause) in enumerate(cases):
        r = write(tmp_path / f"r{i}.jsonl", [report(), line] if i else [line])
        refused(run("nuggets", "score", "--reports", r, "--bank", b, g), r, 2 if i else 1, cause)


def test_numeric_bank_text_says_so(tmp_path):
    for i, (line, cause) in enumerate([(item(text=5), "text must be a string, got int"),
                                       (json.dumps({"qid": "1", "nuggets": [{"text": 5}]}), "'text' must be a string"),
                                       (item(text="  "), "empty item text")]):
        b = write(tmp_path / f"b{i}.jsonl", [line])
        refused(run("nuggets", "bank", "--to", "ours", b), b, 1, cause)


def test_blank_sentence_refused_as_autojudge_base_does_unless_the_spec_allows_it(tmp_path):
    """Decided from autojudge-base 1.0.0 (the reference validator): a blank sentence among
    others is an error of category blank_sentence unless the track spec lists it among its
    smells; then it is a warning and the sentence is not graded (man exam-grade)."""
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [report(sentences=[{"text": "Bees make honey.", "citations": []},
                                                                {"text": "  ", "citations": []}], references=[])])
    b = write(tmp_path / "b.jsonl", [item()])
    base = ["grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--no-cache", "--bank", b,
            "--reports", r]
    refused(run(*base, "-o", tmp_path / "g.jsonl"), r, 1, "responses[1].text is blank",
            "lists blank_sentence among its smells")
    out = tmp_path / "g2.jsonl"
    res = run(*base, "--track-spec", "ragtime26", "-o", out)
    assert res.code == 0, res.stderr
    graded = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["doc_id"].split("/")[2][:2] for g in graded] == ["1-"]  # the first sentence only


def test_lone_surrogates_in_model_answers_are_written_readably(tmp_path):
    """A model's JSON reply may escape a lone surrogate: the grade line records U+FFFD,
    so the grades file stays UTF-8 and readable."""
    from exam_eval.io.grades import read_grades
    from exam_eval.io.jsonl import dumps

    line = dumps(json.loads(grade()) | {"answer": json.loads('"4 \\ud800"')})
    assert "\ud800" not in line and "4 \ufffd" in line
    path = tmp_path / "g.jsonl"
    path.write_bytes((line + "\n").encode("utf-8"))
    assert read_grades(path)[0].answer == "4 \ufffd"


def test_deep_model_output_and_scripted_rules(tmp_path):
    from exam_eval.genq.parse import _load

    assert _load(DEEP) is None or isinstance(_load(DEEP), list)  # no RecursionError
    rules = write(tmp_path / "rules.json", None, DEEP.encode())
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [report()])
    res = run("grade", "--backend", "scripted", "-O", f"script={rules}", "--prompt", "nugget-selfrating",
              "--no-cache", "--bank", write(tmp_path / "b.jsonl", [item()]), "--reports", r,
              "-o", tmp_path / "g.jsonl")
    refused(res, rules, None, "nested deeper than")


def test_report_ids_that_cannot_be_trec_fields(tmp_path):
    b = write(tmp_path / "b.jsonl", [item()])
    g = write(tmp_path / "g.jsonl", [grade()])
    for i, (line, cause) in enumerate([
            (report(sentences=[{"text": "a", "citations": ["p 064"]}]), "cites the document id 'p 064'"),
            (report(sentences=[{"text": "a", "citations": [0]}], references=[""]), "cites the document id ''"),
            (report(md={"run_id": "r\u0000", "topic_id": "101", "team_id": "t"}), "contains control characters")]):
        r = write(tmp_path / f"r{i}.jsonl", [line])
        refused(run("nuggets", "score", "--reports", r, "--bank", b, g), r, 1, cause)


def test_verify_needs_ids_unique_across_queries(tmp_path):
    bank = write(tmp_path / "b.jsonl", [item(item_id="q1", text="first"), item(query_id="102", item_id="q1", text="other")])
    g = write(tmp_path / "g.jsonl", [grade(item_id="q1")])
    refused(run("verify", "grading", g, "--bank", bank), bank, None, "item_id q1 names different texts")


def test_bank_filter_matches_ids_per_query(tmp_path):
    """The same id in two queries (a user's own names) is two items; each query's grades
    stay with its own item, none is taken for a stale grade of the other's text."""
    from exam_eval.io.bank_items import text_hash

    bank = write(tmp_path / "b.jsonl", [item(item_id="q1", text="first", kind="question"),
                                        item(query_id="102", item_id="q1", text="other", kind="question")])
    g = write(tmp_path / "g.jsonl", [grade(item_id="q1", item_hash=text_hash("first"), grade=5),
                                     grade(query_id="102", doc_id="p071", item_id="q1", item_hash=text_hash("other"),
                                           grade=3)])
    res = run("qrels", "--bank", bank, g)
    assert (res.code, res.stdout) == (0, "101 0 p064 5\n102 0 p071 3\n"), res.stderr


@pytest.mark.parametrize("text, refused_for", [
    ("[" * 64 + "]" * 64, None),
    ("[" * 65 + "]" * 65, "nested deeper than 64"),
    ('{"x": "' + "[" * 100 + '"}', None),  # brackets inside a string are text
    ('["' + "]" * 100 + '", ' + "[" * 65 + "]" * 65 + "]", "nested deeper than 64"),  # ... either way
    ('{"a": "\\\\ud800"}', None),  # an escaped backslash, then the letters "ud800"
    ('["\\ud83d\\ude00"]', None),  # a pair
    ('["\\ud800\\ud800\\udc00"]', "lone surrogate \\ud800"),
    ('["\\udc00\\ud800"]', "lone surrogate \\udc00"),
    ('{"n": Infinity}', "Infinity is not allowed"),
    ('{"n": -Infinity}', "-Infinity is not allowed"),
])
def test_json_refusals(text, refused_for):
    from exam_eval.io.jsonl import loads_checked

    if refused_for is None:
        assert loads_checked(text) == json.loads(text)
    else:
        with pytest.raises(ValueError, match=re.escape(refused_for)):
            loads_checked(text)
