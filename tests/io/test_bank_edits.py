"""Human edits of a bank (issue 13, point 1): hand-added items get their ids, an edited
text under an old id is detected and regraded, and ``--bank`` drops grades of the old text.

Ids are recomputed here with hashlib, independently of exam_eval.io.banks."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from exam_eval.io.banks import BankReport, read_bank
from tests.commands.test_grade_cli import BANK, RUNS, base_args, grade, pooled, rows, summary


def md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def bank_lines() -> list[dict]:
    return [json.loads(x) for x in BANK.read_text().splitlines()]


def write_jsonl(path: Path, objs) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


# -- reading --------------------------------------------------------------------------------

def test_hand_added_items_get_their_ids(tmp_path):
    bank = write_jsonl(tmp_path / "b.jsonl", [
        {"query_id": "q1", "item_id": "q1/" + md5("Old?"), "kind": "question", "text": "Old?"},
        {"query_id": "q1", "kind": "question", "text": "  Added by hand?  "},
        {"query_id": "q1", "facet_id": "f2", "kind": "nugget", "text": "a fact", "item_id": ""},
    ])
    report = BankReport()
    items = read_bank(bank, report=report)
    assert [i.item_id for i in items] == ["q1/" + md5("Old?"), "q1/" + md5("Added by hand?"),
                                          "q1/f2/" + md5("a fact")]
    assert [n for n, _ in report.assigned] == [2, 3] and not report.edited
    assert "2 items without item_id" in report.notices("b.jsonl")[0]


def test_hand_added_item_in_a_workbench_bank(tmp_path):
    bank = write_jsonl(tmp_path / "wb.jsonl", [{"query_id": "7", "items": [
        {"query_id": "7", "question_id": "7/" + md5("A?"), "question_text": "A?"},
        {"query_id": "7", "question_text": "B?"}]}])
    report = BankReport()
    assert [i.item_id for i in read_bank(bank, report=report)] == ["7/" + md5("A?"), "7/" + md5("B?")]
    assert len(report.assigned) == 1


def test_edited_text_gets_a_new_id_unless_kept(tmp_path):
    old = "q1/" + md5("What is the old text?")
    bank = write_jsonl(tmp_path / "b.jsonl", [
        {"query_id": "q1", "item_id": old, "kind": "question", "text": "What is the new text?"},
        # the workbench's older banks hashed the unstripped text: not an edit
        {"query_id": "q1", "item_id": "q1/" + md5("Spaces? "), "kind": "question", "text": "Spaces? "},
        # a name the user chose is not a hash: never checked
        {"query_id": "q1", "item_id": "q1-mine", "kind": "question", "text": "Mine?"},
        {"query_id": "q1", "item_id": "q1/not-a-digest", "kind": "question", "text": "Other?"},
    ])
    report = BankReport()
    items = read_bank(bank, report=report)
    assert items[0].item_id == "q1/" + md5("What is the new text?") and not items[0].edited
    assert [i.item_id for i in items[1:]] == ["q1/" + md5("Spaces? "), "q1-mine", "q1/not-a-digest"]
    assert report.edited == [(1, old, items[0].item_id)]
    assert "treated as new items" in report.notices("b")[0]
    kept = read_bank(bank, keep_edited_ids=True)
    assert kept[0].item_id == old and kept[0].edited and not any(i.edited for i in kept[1:])


def test_reference_banks_have_no_edits(shared_data):
    # 79 DL19 / 48 DL20 ids of the older workbench banks hash unstripped text: no edits
    for path in ("dl19/banks/questions-genq-oldformat.jsonl.gz", "dl20/banks/questions-genq-oldformat.jsonl.gz",
                 "dl19/banks/questions.jsonl.gz", "car-y3/banks/questions.jsonl.gz",
                 "car-y3/banks/questions-tqa-style-lines.jsonl.gz"):
        report = BankReport()
        items = read_bank(shared_data / path, report=report)
        assert not report.edited and not report.assigned, path
        with gzip.open(shared_data / path, "rt") as fh:
            raw = fh.read()
        assert all(i.item_id in raw for i in items[:200]), path  # ids as in the file


# -- grading --------------------------------------------------------------------------------

def test_hand_added_question_is_graded_under_its_id(tmp_path):
    objs = bank_lines()
    added = {"query_id": "101", "kind": "question", "text": "Do bees sleep at night?"}
    bank = write_jsonl(tmp_path / "b.jsonl", objs + [added])
    out = tmp_path / "g.jsonl"
    r = grade(*base_args(tmp_path, "-o", out, bank=bank))
    assert r.returncode == 0, r.stderr
    assert "1 items without item_id were given" in r.stderr
    new_id = "101/" + md5("Do bees sleep at night?")
    mine = [x for x in rows(out) if x["item_id"] == new_id]
    assert len(mine) == len(pooled()["101"])
    assert all(x["item_hash"] == md5("Do bees sleep at night?") for x in mine)


def _edit_first_question(objs: list[dict]) -> tuple[list[dict], dict[str, tuple[str, str]]]:
    """The first question of every query gets a new text under its old id."""
    seen, edited, out = set(), {}, []
    for o in objs:
        o = dict(o)
        if o["query_id"] not in seen:
            seen.add(o["query_id"])
            new = o["text"].rstrip("?") + " in winter?"
            edited[o["query_id"]] = (o["item_id"], new)
            o["text"] = new
            o.pop("answers", None)
        out.append(o)
    return out, edited


def _edited_pairs(edited) -> int:
    pool = pooled()
    return sum(len(pool.get(q, ())) for q in edited)


@pytest.mark.parametrize("keep", [False, True])
def test_edited_text_under_old_id_is_regraded(tmp_path, keep):
    out = tmp_path / "g.jsonl"
    r = grade(*base_args(tmp_path, "-o", out))
    assert r.returncode == 0, r.stderr
    first = summary(r.stderr)
    objs, edited = _edit_first_question(bank_lines())
    bank2 = write_jsonl(tmp_path / "edited.jsonl", objs)
    extra = ("--keep-edited-ids",) if keep else ()
    r = grade(*base_args(tmp_path, "-o", out, *extra, bank=bank2))
    assert r.returncode == 0, r.stderr
    s = summary(r.stderr)
    n_edit = _edited_pairs(edited)
    assert n_edit > 0
    # only the edited items' pairs reach the model (or the cache); the rest are in the output
    assert s["graded"] + s["deduplicated"] + s["from_cache"] == n_edit
    assert s["in_output"] == first["pairs"] - n_edit
    assert re.search(rf"{len(edited)} items have a text that no longer matches their item_id", r.stderr)
    new_rows = rows(out)[first["pairs"]:]
    assert len(new_rows) == n_edit
    for x in new_rows:
        old_id, text = edited[x["query_id"]]
        assert x["item_hash"] == md5(text)
        assert x["item_id"] == (old_id if keep else f"{x['query_id']}/{md5(text)}")
    # a third run has nothing left to do
    r = grade(*base_args(tmp_path, "-o", out, *extra, bank=bank2))
    assert summary(r.stderr)["in_output"] == first["pairs"]


def _expected_qrels(grade_rows, bank_objs) -> dict[tuple[str, str], int]:
    """max grade per passage over the grades given for the bank's current texts."""
    current = {(o["query_id"], md5(o["text"].strip())) for o in bank_objs}
    best: dict[tuple[str, str], int] = {}
    last = {}
    for x in grade_rows:  # last line per key wins
        last[(x["query_id"], x["doc_id"], x["item_id"])] = x
    for x in last.values():
        if (x["query_id"], x["item_hash"]) in current and x["parse_ok"]:
            k = (x["query_id"], x["doc_id"])
            best[k] = max(best.get(k, -1), x["grade"])
    return best


def _read_qrels(text: str) -> dict[tuple[str, str], int]:
    return {(q, d): int(v) for q, _, d, v in (line.split() for line in text.splitlines())}


def test_bank_option_drops_stale_grades(tmp_path, run_cli):
    out = tmp_path / "g.jsonl"
    assert grade(*base_args(tmp_path, "-o", out)).returncode == 0
    objs, edited = _edit_first_question(bank_lines())
    bank2 = write_jsonl(tmp_path / "edited.jsonl", objs)
    n_edit = _edited_pairs(edited)
    # not regraded yet: the edited items' grades are of the old text and must go
    r = run_cli("exam-qrels", "--bank", bank2, out)
    assert r.returncode == 0, r.stderr
    assert f"{n_edit} grades given for an older text" in r.stderr
    assert _read_qrels(r.stdout) == _expected_qrels(rows(out), objs)
    unfiltered = _read_qrels(run_cli("exam-qrels", out).stdout)
    assert unfiltered != _read_qrels(r.stdout)  # the check can fail
    # regraded under new ids: the old ids' lines are stale, the new ones count
    assert grade(*base_args(tmp_path, "-o", out, bank=bank2)).returncode == 0
    r = run_cli("exam-qrels", "--bank", bank2, out)
    assert f"{n_edit} grades given for an older text" in r.stderr
    assert _read_qrels(r.stdout) == _expected_qrels(rows(out), objs)
    # exam-cover: each edited item counted once, with its regraded grades only
    run = RUNS[0]
    c = run_cli("exam-cover", "-q", "--bank", bank2, out, run)
    assert c.returncode == 0, c.stderr
    assert f"{n_edit} grades given for an older text" in c.stderr
    cover = {q: float(v) for m, q, v in (line.split() for line in c.stdout.splitlines())
             if m == "exam_cover" and q != "all"}
    assert cover == pytest.approx(_expected_cover(rows(out), objs, run))


def test_an_edited_item_graded_under_both_its_ids_counts_once(tmp_path, run_cli):
    """Graded once with --keep-edited-ids (old id, new text) and once without (new id):
    two current grades of one pair, one item for --label count and for EXAM-Cover."""
    old_id, new_text = "1/" + md5("What was it?"), "What is new?"
    bank = write_jsonl(tmp_path / "b.jsonl", [
        {"query_id": "1", "item_id": old_id, "kind": "question", "text": new_text},
        {"query_id": "1", "item_id": "1/" + md5("Other?"), "kind": "question", "text": "Other?"}])

    def line(item_id, text, grade):
        return {"query_id": "1", "doc_id": "d1", "item_id": item_id, "kind": "question", "grade": grade,
                "probs": None, "answer": str(grade), "parse_ok": True, "model": "m", "prompt": "question-selfrating",
                "prompt_hash": None, "item_hash": md5(text)}

    grades = write_jsonl(tmp_path / "g.jsonl", [line(old_id, new_text, 5), line("1/" + md5(new_text), new_text, 5),
                                                line("1/" + md5("Other?"), "Other?", 1)])
    r = run_cli("exam-qrels", "--label", "count", "--min-grade", "4", "--bank", bank, grades)
    assert r.returncode == 0 and r.stdout == "1 0 d1 1\n", (r.stdout, r.stderr)
    run = tmp_path / "r.run"
    run.write_text("1 Q0 d1 1 1.0 r\n")
    c = run_cli("exam-cover", "-q", "--bank", bank, grades, run)
    assert c.returncode == 0 and "exam_cover\t1\t0.5000" in c.stdout.replace(" ", ""), (c.stdout, c.stderr)


def _grade_line(item_id, text, grade=5, doc="d1"):
    return {"query_id": "1", "doc_id": doc, "item_id": item_id, "kind": "question", "grade": grade, "probs": None,
            "answer": str(grade), "parse_ok": True, "model": "m", "prompt": "question-selfrating",
            "prompt_hash": None, "item_hash": md5(text)}


@pytest.mark.parametrize("copy_first", [False, True])
def test_one_id_for_two_texts_is_refused_by_every_reader(tmp_path, run_cli, copy_first):
    """A line copied and its copy edited: the copy keeps its original's id, so one id names
    two texts (which did it mean?). Every reader of banks refuses it in one line naming both
    lines, exit 2, whichever of the two comes first; it once graded 22 pairs for 11 lines."""
    from refusals import one_line_refusal

    a, b = "What is A?", "What is B?"
    objs = [{"query_id": "1", "item_id": "1/" + md5(a), "kind": "question", "text": t} for t in (a, "x?", b)]
    objs[1]["item_id"] = "1/" + md5("x?")
    if copy_first:
        objs.reverse()
    bank = write_jsonl(tmp_path / "b.jsonl", objs)
    grades = write_jsonl(tmp_path / "g.jsonl", [_grade_line("1/" + md5(a), a)])
    run = tmp_path / "r.run"
    run.write_text("1 Q0 d1 1 1.0 r\n")
    passages = write_jsonl(tmp_path / "p.jsonl", [{"doc_id": "d1", "text": "A is a letter."}])
    said = f"b.jsonl:3: item_id 1/{md5(a)} of query 1 already used for another text on line 1"
    for cmd in (["exam-grade", "--backend", "embedding", "--prompt", "question-selfrating", "--bank", bank,
                 "--passages", passages, "--no-cache", "-o", tmp_path / "out.jsonl", run],
                ["exam-grade", "--backend", "embedding", "--prompt", "question-selfrating", "--bank", bank,
                 "--keep-edited-ids", "--passages", passages, "--no-cache", "-o", tmp_path / "out.jsonl", run],
                ["exam-qrels", "--bank", bank, grades], ["exam-cover", "--bank", bank, grades, run],
                ["exam-genq", "import", bank]):
        res = run_cli(*cmd)
        assert one_line_refusal(res, code=2).endswith(said), (cmd, res.stderr)
        assert not (tmp_path / "out.jsonl").exists()


def test_two_items_under_swapped_ids_keep_their_own_grades(tmp_path, run_cli):
    """Two texts exchanged between lines whose ids stayed (each id now also names the other
    line's edited text): exam-grade grades both items; --bank must count both."""
    a, b = "What is A?", "What is B?"
    bank_objs = [{"query_id": "1", "item_id": "1/" + md5(a), "kind": "question", "text": b},
                 {"query_id": "1", "item_id": "1/" + md5(b), "kind": "question", "text": a}]
    bank = write_jsonl(tmp_path / "b.jsonl", bank_objs)
    grades = write_jsonl(tmp_path / "g.jsonl", [_grade_line("1/" + md5(a), a), _grade_line("1/" + md5(b), b)])
    r = run_cli("exam-qrels", "--label", "count", "--min-grade", "4", "--bank", bank, grades)
    assert r.returncode == 0 and r.stdout == "1 0 d1 2\n", (r.stdout, r.stderr)
    assert "older text" not in r.stderr
    run = tmp_path / "r.run"
    run.write_text("1 Q0 d1 1 1.0 r\n")
    c = run_cli("exam-cover", "-q", "--bank", bank, grades, run)
    assert c.returncode == 0 and "exam_cover\t1\t1.0000" in c.stdout.replace(" ", ""), (c.stdout, c.stderr)
    # a grade of a text that no line holds any more is still left out
    stale = write_jsonl(tmp_path / "s.jsonl", [_grade_line("1/" + md5(a), "What was it?"),
                                               _grade_line("1/" + md5(b), b)])
    r = run_cli("exam-qrels", "--label", "count", "--min-grade", "4", "--bank", bank, stale)
    assert r.stdout == "1 0 d1 1\n" and "1 grades given for an older text" in r.stderr, (r.stdout, r.stderr)


def _expected_cover(grade_rows, bank_objs, run: Path, k=20, tau=4) -> dict[str, float]:
    items = {}
    for o in bank_objs:
        items.setdefault(o["query_id"], set()).add(md5(o["text"].strip()))
    ranked: dict[str, list] = {}
    for line in run.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        ranked.setdefault(q, []).append((float(s), d))
    out = {}
    for q, docs in ranked.items():
        if q not in items:
            continue
        top = {d for _, d in sorted(docs, reverse=True)[:k]}
        got = {x["item_hash"] for x in grade_rows if x["query_id"] == q and x["doc_id"] in top
               and x["parse_ok"] and x["grade"] >= tau and x["item_hash"] in items[q]}
        out[q] = len(got) / len(items[q])
    return out


def test_lines_without_item_hash_still_resume(tmp_path):
    # grades written before lines carried item_hash are not regraded for unchanged items
    out = tmp_path / "g.jsonl"
    r = grade(*base_args(tmp_path, "-o", out))
    first = summary(r.stderr)
    legacy = [{k: v for k, v in x.items() if k != "item_hash"} for x in rows(out)]
    write_jsonl(out, legacy)
    r = grade(*base_args(tmp_path, "-o", out))
    assert summary(r.stderr)["in_output"] == first["pairs"]
    # ... but an item known to be edited (its id kept) is regraded
    objs, edited = _edit_first_question(bank_lines())
    r = grade(*base_args(tmp_path, "-o", out, "--keep-edited-ids", bank=write_jsonl(tmp_path / "e.jsonl", objs)))
    assert summary(r.stderr)["in_output"] == first["pairs"] - _edited_pairs(edited)

