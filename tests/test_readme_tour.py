"""The README's five-minute tour: only data a user can get (no paths of this project's
development setup), and the numbers it shows are what the commands print on that data
(checked on the copies in ../shared/data, skipped without them)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tour() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Five-minute tour")
    return text[start:text.index("\n## ", start + 1)]


def test_tour_names_only_data_a_user_has():
    t = tour()
    assert "../shared" not in t and "shared/data" not in t
    assert "msmarco-passage/trec-dl-2019/judged" in t  # an ir_datasets ID
    assert "https://" in t  # where the downloaded files come from


def test_tour_numbers_hold_on_the_same_public_data(shared_data, run_cli):
    t = tour()
    dl19 = shared_data / "dl19"
    # exam-qrels $GRADES: as many lines as the tour says
    lines = int(re.search(r"# ([\d,]+) lines", t).group(1).replace(",", ""))
    r = run_cli("exam-qrels", dl19 / "graded-flan-t5-large.jsonl.gz")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == lines
    # the trec_eval line it shows, and that it is the run's official score
    shown = re.search(r"#\s+(ndcg_cut_10\s+\tall\t[\d.]+)", t).group(1)
    r = run_cli("exam-qrels", "-c", "-m", "ndcg_cut.10", dl19 / "qrels.txt", dl19 / "runs" / "idst_bert_p1.run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == shown
    official = {row.split("\t")[0]: row.split("\t") for row in (dl19 / "official.tsv").read_text().splitlines()}
    column = official["run"].index("ndcg_cut_10")
    assert shown.endswith("\t" + official["idst_bert_p1"][column])
