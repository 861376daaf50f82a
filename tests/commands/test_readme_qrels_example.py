"""The README's `exam-correlate qrels` example, run as written on TREC DL 2019 (NIST's
qrels as the truth, a judge of the reference workbench as the prediction): it prints
numbers, no "scales differ ... nan", and its pooled figures are those scikit-learn
computes on the same (topic, document) units. Skipped without ../shared/data."""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if x.startswith("exam-correlate qrels ")]
    return shlex.split(line.split("#", 1)[0])


def read_qrels(path: Path) -> dict[tuple[str, str], int]:
    out = {}
    for line in path.read_text().splitlines():
        q, _, d, label = line.split()
        out[(q, d)] = int(label)
    return out


@pytest.mark.shared
def test_readme_qrels_example_prints_numbers(shared_data, run_cli):
    argv = readme_example()
    assert argv[:4] == ["exam-correlate", "qrels", "qrels.txt", "judge.qrels"], argv
    dl19 = shared_data / "dl19"
    # the judge: the workbench's flan-t5-large with Thomas et al.'s prompt (labels 0-2, a few
    # higher), a judge on NIST's scale
    truth_path, judge_path = dl19 / "qrels.txt", dl19 / "llm-qrels" / "Thomas.qrels"
    res = run_cli(*argv[:2], truth_path, judge_path, *argv[4:])
    assert res.returncode == 0, res.stderr
    assert "nan" not in res.stderr and "scales differ" not in res.stderr, res.stderr
    header, *rows = [line.split("\t") for line in res.stdout.splitlines()]
    table = {row[0]: dict(zip(header, row)) for row in rows}
    for summary in ("mean", "pooled"):
        cells = {c: v for c, v in table[summary].items() if c not in ("topic", "tp", "fp", "fn")}
        assert all(re.fullmatch(r"-?\d+\.\d{4}", v) for v in cells.values()), (summary, cells)
    assert len(table) == 43 + 2  # every DL19 topic, then mean and pooled

    # the pooled row against scikit-learn on the same units (union of both sides' documents
    # per topic, a missing one labelled 0, labels clipped to the scales the flags give)
    from sklearn.metrics import cohen_kappa_score

    flags = dict(zip(argv[4::2], map(int, argv[5::2])))
    truth, judge = read_qrels(truth_path), read_qrels(judge_path)
    units = sorted(set(truth) | set(judge))
    t = [min(max(truth.get(u, 0), 0), flags["--truth-max"]) for u in units]
    p = [min(max(judge.get(u, 0), 0), flags["--pred-max"]) for u in units]
    pooled = table["pooled"]
    labels = list(range(flags["--truth-max"] + 1))
    assert float(pooled["kappa_w"]) == pytest.approx(cohen_kappa_score(t, p, weights="linear", labels=labels),
                                                     abs=5e-5)
    tr = [x >= flags["--truth-min"] for x in t]
    pr = [x >= flags["--pred-min"] for x in p]
    tp = sum(a and b for a, b in zip(tr, pr))
    assert int(pooled["tp"]) == tp and int(pooled["fn"]) == sum(a and not b for a, b in zip(tr, pr))
    assert float(pooled["precision"]) == pytest.approx(tp / sum(pr), abs=5e-5)
    a, b = flags["--truth-min"], flags["--pred-min"]
    assert float(pooled[f"kappa@{a}v{b}"]) == pytest.approx(cohen_kappa_score(tr, pr), abs=5e-5)
    assert not math.isnan(float(pooled["kripp_alpha"]))
