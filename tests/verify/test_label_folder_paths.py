"""exam-verify label and label-qrels name the files of FOLDER as a user would write them,
however FOLDER was typed: `sample/` (a shell's completion adds the slash) gives
sample/design.json in every message, never sample//design.json, and so for every file
in FOLDER (sample// too)."""

from __future__ import annotations

import json

import pytest

from test_label_sample import _corpus


def _args(tmp_path, folder: str) -> list[str]:
    runs = _corpus(tmp_path)
    return [folder, *runs, "-n", "2", "-k", "2", "--topics", str(tmp_path / "topics.tsv"),
            "--passages", str(tmp_path / "passages.jsonl"), "--no-serve"]


@pytest.mark.parametrize("slashes", ["/", "//"])
def test_a_trailing_slash_is_not_doubled_in_any_message(tmp_path, run_cli, slashes):
    folder = tmp_path / "sample"
    typed = str(folder) + slashes
    res = run_cli("exam-verify", "label", *_args(tmp_path, typed))
    assert res.returncode == 0, res.stderr
    assert f"the design is {folder}/design.json" in res.stderr, res.stderr
    # a later call given another seed: the refusal names the design
    res = run_cli("exam-verify", "label", typed, "--seed", "5", "--no-serve")
    assert res.returncode == 1 and f"{folder}/design.json" in res.stderr, res.stderr
    res = run_cli("exam-verify", "label", typed, "--order", "pool", "--no-serve")
    assert res.returncode == 1 and f"{folder}/design.json" in res.stderr, res.stderr
    (folder / "labels").mkdir()
    design = json.loads((folder / "design.json").read_text())
    qid = design["queries"][0]
    docno = design["pairs"][qid][0]
    (folder / "labels" / "ann.jsonl").write_text(json.dumps({"event": "label", "qid": qid, "docno": docno,
                                                             "label": 2}) + "\n")
    res = run_cli("exam-verify", "label-qrels", typed)
    assert res.returncode == 0, res.stderr
    assert f"labels and labelled queries in {folder}/qrels/ " in res.stderr, res.stderr
    assert "//" not in res.stderr
    with (folder / "labels" / "ann.jsonl").open("a") as log:   # a broken line: named under FOLDER as typed, less slashes
        log.write('{"event": "relabel"}\n')
    res = run_cli("exam-verify", "label-qrels", typed)
    assert res.returncode == 2 and f"{folder}/labels/ann.jsonl:2" in res.stderr, res.stderr
