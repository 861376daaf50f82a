"""The figures README.md and man/exam-verify.1 give for a DL19 labelling sample (its pairs
at -n 10 and -n 30, the pooled passages without text) are those of the seed, depth and
runs their example prints (issue 56: seed 0's figures once stood next to `--seed 1`)."""

from __future__ import annotations

import re
from pathlib import Path

from exam_eval.verify.label_design import read_design

ROOT = Path(__file__).resolve().parents[2]


def _one(pattern: str, text: str, where: str) -> re.Match:
    found = list(re.finditer(pattern, text))
    assert len(found) == 1, f"{where}: {len(found)} matches of {pattern!r}, not one (was the sentence reworded?)"
    return found[0]


def _readme() -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    example = _one(r"exam-verify label sample/ runs/\* -n \d+ -k (\d+) --seed (\d+) ", text, "README.md")
    figures = _one(r"What it costs, on TREC DL 2019 with the six first-stage runs in `\.\./shared/data/dl19`: "
                   r"(\d+)\s+queries at `-k (\d+)` are (\d+) pairs \((\d+) more pooled passages have no text there"
                   r"[^)]*\), (\d+) queries are (\d+) pairs", text, "README.md")
    n1, k, p1, gone1, n2, p2 = map(int, figures.groups())
    return {"seed": int(example[2]), "k": (int(example[1]), k), "pairs": {n1: p1, n2: p2}, "no text": {n1: gone1}}


def _man() -> dict:
    text = (ROOT / "man" / "exam-verify.1").read_text(encoding="utf-8")
    figures = _one(r"the six first-stage runs: (\d+) queries at\s+\\-k (\d+) are (\d+) pairs, (\d+) queries (\d+)\):"
                   r"\s+\.PP\s+\.nf\s+\.RS\s+exam-verify label sample/ runs/\*\.run \\-n \d+ \\-k (\d+) \\-\\-seed (\d+) ",
                   text, "man/exam-verify.1")
    n1, k, p1, n2, p2, k_example, seed = map(int, figures.groups())
    return {"seed": seed, "k": (k_example, k), "pairs": {n1: p1, n2: p2}}


def test_the_docs_dl19_sample_figures_are_those_of_the_seed_they_print(shared_data, tmp_path, run_cli):
    dl = shared_data / "dl19"
    runs = sorted(str(p) for p in (dl / "first-stage-runs").glob("*.run"))
    assert len(runs) == 6   # "the six first-stage runs"
    readme, man = _readme(), _man()
    drawn: dict = {}
    for doc in (readme, man):
        k_example, k = doc["k"]
        assert k_example == k, doc   # the figures are of the example's depth
        for n in doc["pairs"]:
            key = (doc["seed"], k, n)
            if key not in drawn:
                folder = tmp_path / f"seed{doc['seed']}-k{k}-n{n}"
                res = run_cli("exam-verify", "label", str(folder), *runs, "-n", str(n), "-k", str(k),
                              "--seed", str(doc["seed"]), "--topics", str(dl / "topics.tsv"),
                              "--passages", str(dl / "passages.jsonl.gz"), "--no-serve")
                assert res.returncode == 0, res.stderr
                design = read_design(str(folder))
                drawn[key] = (len(design.pair_list()), sum(len(v) for v in design.missing.values()))
    for doc, where in ((readme, "README.md"), (man, "man/exam-verify.1")):
        _, k = doc["k"]
        got = {n: drawn[(doc["seed"], k, n)][0] for n in doc["pairs"]}
        assert got == doc["pairs"], f"{where}: pairs at --seed {doc['seed']} -k {k} are {got}, it says {doc['pairs']}"
        for n, gone in doc.get("no text", {}).items():
            assert drawn[(doc["seed"], k, n)][1] == gone, (where, n, drawn[(doc["seed"], k, n)][1], gone)
