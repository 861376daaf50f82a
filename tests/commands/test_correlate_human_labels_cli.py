"""exam-correlate where human labels are few or on both sides (issue 57, item 13): the
agreement of two assessors' qrels speaks of an assessor, not of an LLM, and intervals from
very few labelled queries say that they cannot be trusted."""

from __future__ import annotations

import numpy as np
import pytest

from refusals import one_line_refusal

ANN = "1 0 a 0\n1 0 b 1\n1 0 c 2\n1 0 d 3\n2 0 a 2\n2 0 b 0\n2 0 c 3\n2 0 e 1\n"
BOB = "1 0 a 1\n1 0 b 1\n1 0 c 3\n1 0 d 2\n2 0 a 2\n2 0 b 1\n2 0 c 1\n2 0 e 0\n"


def _kappa(tp, fp, fn, tn):
    n = tp + fp + fn + tn
    po = (tp + tn) / n
    pe = ((tp + fp) / n) * ((tp + fn) / n) + ((fn + tn) / n) * ((fp + tn) / n)
    return (po - pe) / (1 - pe)


def test_two_assessors_agreement_names_no_llm(run_cli, tmp_path):
    ann, bob = tmp_path / "ann.qrels", tmp_path / "bob.qrels"
    ann.write_text(ANN)
    bob.write_text(BOB)
    r = run_cli("exam-correlate", "agreement", ann, bob, "--human-min", "2", "--assessor-min", "2")
    assert r.returncode == 0, r.stderr
    assert "llm" not in r.stdout.lower(), r.stdout
    head = dict(line.split("\t") for line in r.stdout.split("\n\n")[0].splitlines())
    assert head["assessor_min"] == "2" and head["human_judged_without_assessor_label"] == "0"
    # ann >= 2: 1c 1d 2a 2c; bob >= 2: 1c 1d 2a -> tp 3, fp 0, fn 1 (2c), tn 4
    assert float(head["kappa"]) == pytest.approx(_kappa(3, 0, 1, 4), abs=5e-5)
    assert "assessor>=2\t3\t0\t3" in r.stdout and "LENIENT" not in r.stdout and "STRICT" not in r.stdout
    # an LLM's qrels keep their report as it was
    r = run_cli("exam-correlate", "agreement", ann, bob, "--human-min", "2", "--llm-min", "2")
    assert r.returncode == 0 and "llm_min\t2" in r.stdout and "LENIENT" in r.stdout
    r = run_cli("exam-correlate", "agreement", ann, bob, "--llm-min", "2", "--assessor-min", "2")
    assert one_line_refusal(r, "exam-correlate", 1).startswith("exam-correlate: --llm-min and --assessor-min")


def _interval_inputs(tmp_path, nq=12):
    rng = np.random.default_rng(1)
    hq, lq, run = [], [], []
    for q in range(nq):
        for d in range(10):
            h = int(rng.integers(0, 4))
            hq.append(f"q{q} 0 d{d} {h}")
            lq.append(f"q{q} 0 d{d} {int(np.clip(h + rng.integers(-1, 2), 0, 3))}")
            run.append(f"q{q} Q0 d{d} {d + 1} {10 - d} r")
    paths = tmp_path / "h.qrels", tmp_path / "l.qrels", tmp_path / "r.run"
    for p, rows in zip(paths, (hq, lq, run)):
        p.write_text("\n".join(rows) + "\n")
    return paths


def test_intervals_from_two_labelled_queries_warn_once(run_cli, tmp_path):
    h, l_, run = _interval_inputs(tmp_path)
    r = run_cli("exam-correlate", "interval", h, l_, run, "--n-labelled", "2", "--methods", "bootstrap,ppi",
                "--samples", "200", "-m", "ndcg@10")
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].startswith("exam-correlate: warning: only 2 labelled queries") and "1 - alpha" in warnings[0]
    assert len(r.stdout.strip().splitlines()) == 3  # header, bootstrap, ppi: a warning, not a refusal
    r = run_cli("exam-correlate", "interval", h, l_, run, "--n-labelled", "10", "--methods", "bootstrap,ppi",
                "--samples", "200", "-m", "ndcg@10")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
