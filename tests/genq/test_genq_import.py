"""exam-genq import: the reference workbench's banks and multiple-choice banks.

Ids and counts are checked against a direct reading of the files (gzip + json here, not
exam_eval's readers)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)


def md5(s: str) -> str:
    return hashlib.md5(s.encode("utf-8")).hexdigest()


def direct_ids(path: Path) -> dict[str, tuple[str, str | None, str]]:
    """item id -> (query_id, facet_id, text), straight from the file."""
    out = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            if "qid" in obj:
                if obj["question"] is not None and obj["question"].strip():
                    out[obj["qid"]] = (obj["query_id"], obj.get("facet_id"), obj["question"])
                continue
            for e in obj.get("items", obj.get("questions")):
                iid = e.get("question_id") or e.get("nugget_id")
                out[iid] = (obj["query_id"], obj.get("facet_id"), e.get("question_text") or e.get("nugget_text"))
    return out


EXPECTED = {  # README counts; DL19 nuggets: 464 entries, 3 exact repeats -> 461 ids
    "dl19/banks/questions.jsonl.gz": 430, "dl19/banks/questions-genq-oldformat.jsonl.gz": 430,
    "dl19/banks/nuggets.jsonl.gz": 461,
    "dl20/banks/questions.jsonl.gz": 540, "dl20/banks/questions-genq-oldformat.jsonl.gz": 540,
    "dl20/banks/nuggets.jsonl.gz": 540,
    "car-y3/banks/questions.jsonl.gz": 8551, "car-y3/banks/nuggets.jsonl.gz": 3180,
    "car-y3/banks/questions-tqa-style-lines.jsonl.gz": 8877,
}


def test_every_shared_bank_is_covered(shared_data):
    found = {str(p.relative_to(shared_data)) for p in shared_data.glob("*/banks/*.jsonl.gz")}
    assert found == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_import_keeps_every_id(shared_data, tmp_path, run_cli, rel):
    src = shared_data / rel
    out = tmp_path / "bank.jsonl"
    r = run_cli("exam-genq", "import", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    items = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    ids = [i["item_id"] for i in items]
    assert len(ids) == len(set(ids)) == EXPECTED[rel]
    truth = direct_ids(src)
    assert set(ids) == set(truth)
    for it in items:
        qid, facet, text = truth[it["item_id"]]
        assert (it["query_id"], it.get("facet_id"), it["text"]) == (qid, facet, text)
        assert it["kind"] == ("nugget" if "nugget" in rel else "question")
    prefix = lambda it: it["query_id"] + (f"/{it['facet_id']}" if it.get("facet_id") else "")
    rederived = sum(prefix(it) + "/" + md5(it["text"].strip()) == it["item_id"] for it in items)
    if "oldformat" in rel:
        # the old format hashed the unstripped text: ids kept as they are
        assert all(prefix(it) + "/" + md5(it["text"]) == it["item_id"] for it in items)
        assert rederived < len(items)
    elif "tqa" in rel:
        # most of these ids hash a text other than the question as stored (the generator's
        # raw line): nothing to re-derive, the ids are simply kept (checked above)
        assert rederived < len(items)
    else:
        assert rederived == len(items)
    assert f"{len(items)} items" in r.stderr
    # what import wrote reads back as itself: the same ids, here and when imported again
    again = tmp_path / "again.jsonl"
    r = run_cli("exam-genq", "import", str(out), "-o", str(again))
    assert r.returncode == 0 and again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8"), r.stderr
    assert "edited by hand" not in r.stderr


def test_tqa_blank_lines_skipped_and_counted(shared_data, run_cli, tmp_path):
    r = run_cli("exam-genq", "import", shared_data / "car-y3/banks/questions-tqa-style-lines.jsonl.gz",
                "-o", tmp_path / "o.jsonl")
    with gzip.open(shared_data / "car-y3/banks/questions-tqa-style-lines.jsonl.gz", "rt") as fh:
        blank = sum(1 for line in fh if not (json.loads(line)["question"] or "").strip())
    assert blank == 16
    assert f"{blank} lines without question text skipped" in r.stderr


def test_dl19_nugget_repeats_reported(shared_data, run_cli, tmp_path):
    r = run_cli("exam-genq", "import", shared_data / "dl19/banks/nuggets.jsonl.gz", "-o", tmp_path / "o.jsonl")
    assert "3 exact repeats dropped" in r.stderr


MC = [
    {"query_id": "L1", "qid": "L1/T1/a", "question": "Which layer is outermost?", "facet_id": "T1",
     "choices": {"a": "dermis", "b": "epidermis", "c": "hypodermis"}, "correctKey": "b", "correct": None},
    {"query_id": "L1", "qid": "L1/T1/b", "question": "Skin colour comes from?",
     "choices": ["keratin", "melanin"], "correctKey": "b"},
    {"query_id": "L1", "qid": "L1/T1/c", "question": "TQA-style nested choices?",
     "choices": {"a": {"idStructural": "a.", "processedText": "yes"}, "b": {"processedText": "no"}},
     "correctKey": "a"},
    {"query_id": "L1", "qid": "L1/T1/d", "question": "Only the answer text?", "choices": None,
     "correctKey": None, "correct": "forty two"},
    {"query_id": "L1", "qid": "L1/T1/e", "question": "No key at all?", "choices": None, "correctKey": None,
     "correct": None},
    {"query_id": "L1", "qid": "L1/T1/f", "question": None, "choices": None, "correctKey": None, "correct": None},
]


def test_multiple_choice_answer_keys(tmp_path, run_cli):
    src = tmp_path / "mc.jsonl"
    src.write_text("".join(json.dumps(o) + "\n" for o in MC))
    r = run_cli("exam-genq", "import", str(src))
    assert r.returncode == 0, r.stderr
    items = {i["item_id"]: i for i in map(json.loads, r.stdout.splitlines())}
    assert list(items) == ["L1/T1/a", "L1/T1/b", "L1/T1/c", "L1/T1/d", "L1/T1/e"]
    assert items["L1/T1/a"]["answers"] == ["epidermis"]
    assert items["L1/T1/b"]["answers"] == ["melanin"]
    assert items["L1/T1/c"]["answers"] == ["yes"]
    assert items["L1/T1/d"]["answers"] == ["forty two"]
    assert "answers" not in items["L1/T1/e"]
    assert items["L1/T1/a"]["facet_id"] == "T1"
    assert items["L1/T1/a"]["choices"] == MC[0]["choices"]
    assert "1 lines without question text skipped" in r.stderr


def test_multiple_choice_bad_key_is_located(tmp_path, run_cli):
    src = tmp_path / "mc.jsonl"
    bad = dict(MC[0], correctKey="z")
    src.write_text(json.dumps(MC[1]) + "\n" + json.dumps(bad) + "\n")
    out = tmp_path / "o.jsonl"
    r = run_cli("exam-genq", "import", str(src), "-o", str(out))
    assert r.returncode == 2
    assert f"{src}:2: correctKey 'z' is not one of the choices" in r.stderr
    assert not out.exists()


def test_import_refuses_to_overwrite(tmp_path, run_cli):
    src = tmp_path / "mc.jsonl"
    src.write_text(json.dumps(MC[0]) + "\n")
    out = tmp_path / "o.jsonl"
    out.write_text("precious\n")
    r = run_cli("exam-genq", "import", str(src), "-o", str(out))
    assert r.returncode == 1 and out.read_text() == "precious\n"
    r = run_cli("exam-genq", "import", str(src), "-o", str(out), "--force")
    assert r.returncode == 0 and json.loads(out.read_text())["answers"] == ["epidermis"]


def _workbench_lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.parametrize("bank,kind", [("dl19/banks/questions.jsonl.gz", "question"),
                                       ("car-y3/banks/nuggets.jsonl.gz", "nugget")])
def test_generating_the_reference_texts_reproduces_the_reference_ids(shared_data, tmp_path, run_cli, bank, kind):
    """A model answering with the workbench's own texts yields the workbench's ids."""
    lines = _workbench_lines(shared_data / bank)
    field = kind + "s"
    car = "car-y3" in bank
    script, topics, truth = [], {}, []
    for obj in lines:
        texts = [e[f"{kind}_text"] for e in obj["items"]]
        row = {"query_id": obj["query_id"], "response": json.dumps({field: texts})}
        if car:
            row["facet_id"] = obj["facet_id"]
            title, facet = obj["query_text"].split(" / ", 1)
            topics.setdefault(obj["query_id"], {"query_id": obj["query_id"], "text": title, "subtopics": []})
            topics[obj["query_id"]]["subtopics"].append({"facet_id": obj["facet_id"], "text": facet})
        else:
            topics[obj["query_id"]] = {"query_id": obj["query_id"], "text": obj["query_text"]}
        script.append(row)
        seen = set()
        for e in obj["items"]:  # generated banks drop exact repeats, like the importer
            if e[f"{kind}_id"] not in seen:
                seen.add(e[f"{kind}_id"])
                truth.append(e[f"{kind}_id"])
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in script))
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in topics.values()))
    args = ["--backend", "scripted", "--script", tmp_path / "s.jsonl", "--kind", kind, tmp_path / "t.jsonl"]
    if car:
        args = ["--style", "car", *args]
    r = run_cli("exam-genq", *args, env={"EXAM_EVAL_PROGRESS": "0"})
    assert r.returncode == 0, r.stderr
    got = [json.loads(x)["item_id"] for x in r.stdout.splitlines()]
    assert sorted(got) == sorted(truth)


def test_a_multiple_choice_bank_imported_keeps_its_hashed_looking_ids_when_read_again(tmp_path, run_cli):
    """The CAR file's ids look like query/facet/<32 hex> but hash another text: kept on
    import, they were then taken for hand edits by every reader of the imported file."""
    src = tmp_path / "mc.jsonl"
    qid = "L1/T1/" + md5("the generator's raw line")
    src.write_text(json.dumps({"query_id": "L1", "qid": qid, "question": "What is skin?", "choices": None,
                               "correctKey": None, "correct": None, "facet_id": "T1"}) + "\n")
    out = tmp_path / "bank.jsonl"
    assert run_cli("exam-genq", "import", src, "-o", out).returncode == 0
    again = run_cli("exam-genq", "import", out)
    assert again.returncode == 0 and again.stdout == out.read_text() and "edited" not in again.stderr
    assert json.loads(again.stdout)["item_id"] == qid
    grades = tmp_path / "g.jsonl"
    grades.write_text(json.dumps({"query_id": "L1", "doc_id": "d1", "item_id": qid, "kind": "question", "grade": 5,
                                  "probs": None, "answer": "5", "parse_ok": True, "model": "m",
                                  "prompt": "question-selfrating", "prompt_hash": None}) + "\n")
    for bank in (src, out):
        r = run_cli("exam-qrels", "--bank", bank, grades)
        assert r.returncode == 0 and r.stdout == "L1 0 d1 5\n", (bank, r.stderr)
