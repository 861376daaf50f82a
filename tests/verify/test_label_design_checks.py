"""design.json is checked on reading, field by field, and must follow from its own seed,
depth and runs (issue 56): a hand-edited or broken design is refused in one line naming
the file and the field, by exam-verify label (resume) and by exam-verify label-qrels
alike, never a traceback and never a sample that is no longer a uniform draw."""

from __future__ import annotations

import json

import pytest

from refusals import one_line_refusal
from test_label_nuggets import _rag
from test_label_sample import _corpus

from exam_eval.verify.label_design import read_design


def _drawn(tmp_path, run_cli, *, drop_texts: bool = False):
    """A passage sample of 4 queries at -k 4, seed 1 (so that a seed of `true` reads as 1);
    with DROP_TEXTS some pooled passages have no text (design.json's missing_text)."""
    runs = _corpus(tmp_path)
    if drop_texts:
        lines = (tmp_path / "passages.jsonl").read_text().splitlines()
        (tmp_path / "passages.jsonl").write_text("".join(ln + "\n" for i, ln in enumerate(lines) if i % 5))
    folder = tmp_path / "s"
    res = run_cli("exam-verify", "label", str(folder), *runs, "-n", "4", "-k", "4", "--seed", "1",
                  "--topics", str(tmp_path / "topics.tsv"), "--passages", str(tmp_path / "passages.jsonl"), "--no-serve")
    assert res.returncode == 0, res.stderr
    return folder


def _edit(folder, change) -> None:
    path = folder / "design.json"
    obj = json.loads(path.read_text())
    change(obj)
    path.write_text(json.dumps(obj, indent=1) + "\n")


def _both_refuse(run_cli, folder, field: str) -> list[str]:
    """label FOLDER --no-serve and label-qrels FOLDER: each one line, exit 2, naming the
    design file and FIELD."""
    name = str(folder / "design.json")
    lines = []
    for argv in (("label", str(folder), "--no-serve"), ("label-qrels", str(folder))):
        line = one_line_refusal(run_cli("exam-verify", *argv), "exam-verify", 2)
        assert line.startswith(f"exam-verify: {name}: not a label design: "), (argv, line)
        assert f'field "{field}"' in line, (argv, line)
        lines.append(line)
    return lines


def _recount(obj):
    obj["n_pairs"] = sum(len(v) for v in obj["pairs"].values())


def _swap_first_two(obj):
    obj["queries"][:2] = obj["queries"][1::-1]


def _first(obj):
    return obj["queries"][0]


# (test id, change to design.json, the field the refusal names, words it must say)
CORRUPTIONS = [
    ("scale 0-9", lambda o: o.update(scale="0-9"), "scale", ['"0-9", not one of 0-1, 0-2, 0-3']),
    ("runs as strings", lambda o: o.update(runs=[r["path"] for r in o["runs"]]), "runs", ["(item 1)"]),
    ("pairs as a list", lambda o: o.update(pairs=[d for v in o["pairs"].values() for d in v]), "pairs", []),
    ("mode changed", lambda o: o.update(mode="nugget"), "mode", ['"nugget"']),
    ("scale a list", lambda o: o.update(scale=["0-3"]), "scale", ['["0-3"]']),
    ("mode unknown", lambda o: o.update(mode="passages"), "mode", ["not one of passage, nugget"]),
    ("queries reordered", _swap_first_two, "queries", ['draw of field "seed" (1)']),
    ("a pair as a string", lambda o: o["pairs"].update({_first(o): " ".join(o["pairs"][_first(o)])}), "pairs",
     ["not a list of strings"]),
    ("depth changed", lambda o: o.update(depth=3), "depth", ['"pairs"', "(3)"]),
    ("depth as a string", lambda o: o.update(depth="4"), "depth", ['"4"']),
    ("seed as a bool", lambda o: o.update(seed=True), "seed", ["true"]),
    ("seed negative", lambda o: o.update(seed=-1), "seed", ["-1"]),
    ("a query twice", lambda o: o["queries"].__setitem__(-1, o["queries"][0]), "queries", ["twice"]),
    ("a docno outside the pool", lambda o: (o["pairs"][_first(o)].append("nowhere"), o.update(n_pairs=o["n_pairs"] + 1)),
     "pairs", ["pool"]),
    ("pairs reordered", lambda o: o["pairs"][_first(o)].reverse(), "pairs", ["order"]),
    ("a pair dropped", lambda o: (o["pairs"][_first(o)].pop(), o.update(n_pairs=o["n_pairs"] - 1)), "pairs", []),
    ("n_pairs wrong", lambda o: o.update(n_pairs=o["n_pairs"] + 1), "n_pairs", []),
    ("n_queries a string", lambda o: o.update(n_queries="4"), "n_queries", ['"4"']),
    ("a query without pairs", lambda o: o["pairs"].pop(o["queries"][-1]), "pairs", []),
    ("a sha256 not hex", lambda o: o["runs"][1].update(sha256="z" * 64), "runs", ["(item 2)"]),
    ("shared_queries changed", lambda o: o.update(shared_queries=6), "shared_queries", ["share 7"]),
    ("queries missing", lambda o: o.pop("queries"), "queries", ["missing"]),
    ("topics a number", lambda o: o.update(topics=3), "topics", []),
    ("llm a path", lambda o: o.update(llm="llm.qrels"), "llm", []),
]


@pytest.mark.parametrize("change, field, words", [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_a_broken_or_edited_design_is_refused_in_one_line_naming_the_field(tmp_path, run_cli, change, field, words):
    folder = _drawn(tmp_path, run_cli)
    # the design as written reads back and follows from its inputs, in both commands
    assert run_cli("exam-verify", "label", str(folder), "--no-serve").returncode == 0
    assert run_cli("exam-verify", "label-qrels", str(folder)).returncode == 0
    _edit(folder, change)
    before = (folder / "design.json").read_bytes()
    for line in _both_refuse(run_cli, folder, field):
        assert all(w in line for w in words), (words, line)
    assert (folder / "design.json").read_bytes() == before   # refused, not rewritten
    # nor does extending the sample take it
    line = one_line_refusal(run_cli("exam-verify", "label", str(folder), "-n", "5", "--no-serve"), "exam-verify", 2)
    assert f'field "{field}"' in line


def test_the_passages_without_text_must_be_those_of_the_pool(tmp_path, run_cli):
    folder = _drawn(tmp_path, run_cli, drop_texts=True)
    design = read_design(str(folder))
    q = next(q for q in design.queries if design.missing.get(q))
    gone = design.missing[q][0]
    assert run_cli("exam-verify", "label-qrels", str(folder)).returncode == 0
    original = (folder / "design.json").read_text()
    # a passage without text put back among the pairs, still listed as without text
    _edit(folder, lambda o: (o["pairs"][q].append(gone), _recount(o)))
    line, _ = _both_refuse(run_cli, folder, "missing_text")
    assert f'"{gone}", which "pairs" has' in line
    # dropped from missing_text alone: the pairs lack a passage of the pool
    (folder / "design.json").write_text(original)
    _edit(folder, lambda o: o["missing_text"][q].remove(gone))
    line, _ = _both_refuse(run_cli, folder, "pairs")
    assert f'of query "{q}"' in line
    # a docno that no run pooled, listed as without text
    (folder / "design.json").write_text(original)
    _edit(folder, lambda o: o["missing_text"][q].append("nowhere"))
    line, _ = _both_refuse(run_cli, folder, "missing_text")
    assert '"nowhere", which is not in its pool' in line
    # the design as written still extends, and the extended one reads back as following
    (folder / "design.json").write_text(original)
    assert run_cli("exam-verify", "label", str(folder), "-n", "6", "--no-serve").returncode == 0
    assert run_cli("exam-verify", "label-qrels", str(folder)).returncode == 0


def test_a_nugget_design_must_follow_from_its_reports_and_bank(tmp_path, run_cli):
    _rag(tmp_path)
    folder = tmp_path / "s"
    res = run_cli("exam-verify", "label", str(folder), "--reports", str(tmp_path / "runs"), "--bank",
                  str(tmp_path / "bank.jsonl"), "-n", "2", "--seed", "1", "--no-serve")
    assert res.returncode == 0, res.stderr
    assert run_cli("exam-verify", "label-qrels", str(folder)).returncode == 0
    original = (folder / "design.json").read_text()
    for change, field in ((_swap_first_two, "queries"),
                          (lambda o: o["pairs"][_first(o)].pop(0), "pairs"),
                          (lambda o: o.update(depth=10), "depth"),
                          (lambda o: o.update(scale="0-3"), "scale"),
                          (lambda o: o.update(mode="passage"), "mode"),
                          (lambda o: o.update(bank=None), "mode"),
                          (lambda o: o["pairs"][_first(o)].__setitem__(0, "no-tab"), "pairs")):
        (folder / "design.json").write_text(original)
        _edit(folder, lambda o, change=change: (change(o), _recount(o)))
        _both_refuse(run_cli, folder, field)
