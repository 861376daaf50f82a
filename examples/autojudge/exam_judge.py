#!/usr/bin/env python3
"""exam_eval as a TREC AutoJudge judge (the autojudge-base protocol: ``create_nuggets``,
``create_qrels``, ``judge``), in a few lines over :mod:`exam_eval.api`.

- ``create_nuggets`` returns the nugget banks it was given, or this judge's own bank
  (``bank=``, any bank exam_eval reads) as AutoJudge NuggetBanks. It writes no new
  nuggets: exam_eval grades against a bank (make one with exam-genq).
- ``judge`` grades every report sentence against the bank (``prompt`` on ``backend``:
  the embedding back end by default, offline) and returns a Leaderboard of the
  AutoNuggetizer scores (All, Vital, Weighted) and EXAM-Cover per (run, topic), with the
  ``all`` rows autojudge-base adds.
- ``create_qrels`` returns document qrels from citations: a cited document's grade is
  the best nugget support level (0-2) of the sentences citing it.

``llm_config`` is not read: the grader is this judge's ``backend`` / ``model``
(``backend="endpoint", base_url=..., model=...`` reaches the same servers).

Run on the AutoJudge spot-check data (reports in runs/, queries.jsonl)::

    python examples/autojudge/exam_judge.py ../shared/data/autojudge-spot-check \\
        --bank examples/autojudge/nuggets-28.jsonl --backend embedding
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

from exam_eval import autojudge_offline

autojudge_offline.prepare()  # autojudge-base downloads nltk data on import; offline it needs a stand-in

from autojudge_base import LeaderboardBuilder, LeaderboardSpec, MeasureSpec, QrelRow, Qrels, Request  # noqa: E402
from autojudge_base.nugget_data import NuggetBanks, load_nugget_banks_from_file  # noqa: E402
from autojudge_base.report import load_report  # noqa: E402

from exam_eval import api  # noqa: E402
from exam_eval.errors import ExamEvalError, InputError  # noqa: E402
from exam_eval.io.banks import items_by_query  # noqa: E402
from exam_eval.io.nugget_banks import items_from_track_bank, write_autojudge_bank  # noqa: E402

MEASURES = {
    "nugget_all": "AutoNuggetizer All: mean nugget support (1 support, 0.5 partial)",
    "nugget_vital": "AutoNuggetizer Vital: the same over the vital nuggets",
    "nugget_weighted": "AutoNuggetizer Weighted: vital weight 1, okay 0.5",
    "exam_cover": "EXAM-Cover: fraction of the topic's bank items the report answers",
}


class ExamJudge:
    nugget_banks_type = NuggetBanks

    def __init__(self, bank: str | None = None, prompt: str = "nugget-selfrating", backend: str = "embedding",
                 cache: str | None = None, **backend_options):
        self.bank, self.prompt, self.backend, self.cache = bank, prompt, backend, cache
        self.backend_options = backend_options
        self._memo: tuple | None = None

    def _items(self, nugget_banks):
        if nugget_banks is None:
            return api.read_bank(self.bank)
        items = [i for b in nugget_banks.banks.values()
                 for i in items_from_track_bank(b.model_dump(mode="json", exclude_none=True), "<nugget_banks>", 0)]
        return items_by_query(items)

    def _graded(self, rag_responses, rag_topics, nugget_banks):
        reports = api.as_reports(rag_responses)
        key = (tuple(r.doc_id for r in reports), id(nugget_banks))
        if self._memo is None or self._memo[0] != key:  # judge and create_qrels grade once
            bank = self._items(nugget_banks)
            grades = api.grade(reports, bank=bank, prompt=self.prompt, backend=self.backend, queries=rag_topics,
                               cache=self.cache, **self.backend_options)
            self._memo = (key, reports, bank, grades)
        return self._memo[1:]

    def create_nuggets(self, rag_responses, rag_topics, llm_config, nugget_banks=None, corpus=None, **kwargs):
        if nugget_banks is not None or self.bank is None:
            return nugget_banks
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bank.jsonl")
            items = [i for its in api.read_bank(self.bank).values() for i in its]
            write_autojudge_bank(items, path, api.as_queries(rag_topics))
            return load_nugget_banks_from_file(Path(path))

    def judge(self, rag_responses, rag_topics, llm_config, nugget_banks=None, qrels=None, corpus=None, **kwargs):
        reports, bank, grades = self._graded(rag_responses, rag_topics, nugget_banks)
        per_topic, _ = api.nugget_scores(reports, grades, bank)
        builder = LeaderboardBuilder(LeaderboardSpec(tuple(MeasureSpec(m, description=d) for m, d in MEASURES.items())))
        for (run, topic), values in sorted(per_topic.items()):
            builder.add(run_id=run, topic_id=topic, values={m: values[m] for m in MEASURES})
        return builder.build(expected_topic_ids=[str(t.request_id) for t in rag_topics], on_missing="default")

    def create_qrels(self, rag_responses, rag_topics, llm_config, nugget_banks=None, corpus=None, **kwargs):
        reports, _, grades = self._graded(rag_responses, rag_topics, nugget_banks)
        qrels = api.citation_qrels(reports, grades)
        return Qrels(rows=[QrelRow(topic_id=t, doc_id=d, grade=g) for t in sorted(qrels) for d, g in
                           sorted(qrels[t].items())])


PROG = "exam_judge.py"


def read_dataset(dataset: Path):
    """The reports of ``dataset``/runs and its queries; bad input is an InputError naming
    the file and line (exam_eval's readers check first, then autojudge-base loads)."""
    if not (dataset / "runs").is_dir() or not (dataset / "queries.jsonl").is_file():
        raise InputError("not an AutoJudge dataset: it needs a runs/ folder of reports and queries.jsonl (e.g. "
                         "auto-judge-base's tests/resources/spot-check-dataset)", str(dataset))
    files = sorted((dataset / "runs").glob("*.jsonl"))
    if not files:
        raise InputError("no reports (*.jsonl) in runs/", str(dataset))
    api.read_reports([str(f) for f in files])  # one line for a malformed report, where autojudge-base would raise
    topics = [Request(request_id=q, title=t) for q, t in api.read_requests(str(dataset / "queries.jsonl")).items()]
    return [r for f in files for r in load_report(f)], topics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", type=Path, help="directory with runs/ (reports) and queries.jsonl")
    ap.add_argument("--bank", required=True)
    ap.add_argument("--backend", default="embedding")
    ap.add_argument("--prompt", default="nugget-selfrating")
    ap.add_argument("--out", type=Path, default=None,
                    help="directory for leaderboard.tot and cited.qrels; without it both are printed, each after a "
                         "'# file' heading, and nothing is written")
    args = ap.parse_args()
    try:
        reports, topics = read_dataset(args.dataset)
        judge = ExamJudge(bank=args.bank, prompt=args.prompt, backend=args.backend)
        banks = judge.create_nuggets(reports, topics, None)
        qrels = judge.create_qrels(reports, topics, None, nugget_banks=banks)
        board = judge.judge(reports, topics, None, nugget_banks=banks, qrels=qrels)
    except ExamEvalError as exc:  # one line and exit 2 (1 for a usage error), as the exam-* commands
        sys.stderr.write(f"{PROG}: {exc}\n")
        sys.exit(exc.exit_code)
    cited = "".join(f"{row.topic_id} 0 {row.doc_id} {row.grade}\n" for row in qrels.rows)
    # autojudge-base writes a leaderboard to a file only, and says so on stdout
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        board.write(Path(tmp) / "leaderboard.tot", format="tot")
        tot = (Path(tmp) / "leaderboard.tot").read_text()
    if args.out is None:
        sys.stdout.write("# leaderboard.tot (run measure topic value)\n" + tot
                         + "# cited.qrels (topic 0 doc_id grade)\n" + cited)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "leaderboard.tot").write_text(tot)
    (args.out / "cited.qrels").write_text(cited)
    sys.stderr.write(f"{PROG}: wrote {args.out / 'leaderboard.tot'} and {args.out / 'cited.qrels'}\n")


if __name__ == "__main__":
    main()
