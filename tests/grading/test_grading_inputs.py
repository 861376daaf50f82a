"""grading.inputs.cited_texts: the cited documents' texts exam-grade --cited-documents and
api.grade(cited_documents=True) show the grader, from one function."""

from __future__ import annotations

from pathlib import Path

from exam_eval import api
from exam_eval.grading.inputs import cited_texts
from exam_eval.io.passages import read_passages
from exam_eval.io.reports import reports_from_run
from exam_eval.trec_eval.trec_files import read_run

DEMO = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"


def _reports():
    texts = read_passages(str(DEMO / "passages.jsonl"))
    objs = reports_from_run("good", read_run(str(DEMO / "good.run")), texts, depth=3)
    return api.as_reports(objs[:2]), texts


def test_from_a_file_a_mapping_and_the_reports_themselves():
    reports, texts = _reports()
    wanted_ids = {d for r in reports for d in r.cited_doc_ids()}
    assert len(wanted_ids) == 6
    from_file, wanted = cited_texts(reports, str(DEMO / "passages.jsonl"))
    assert wanted == wanted_ids
    assert from_file == {d: texts[d] for d in wanted_ids}
    some = dict(list({d: texts[d] for d in sorted(wanted_ids)}.items())[:4])
    from_map, _ = cited_texts(reports, {**some, "p999": "not cited"})
    assert from_map == some  # only cited documents, and only those the mapping has
    assert cited_texts(reports, None) == ({}, wanted_ids)
    # a text the report embeds wins over the passages
    first = sorted(wanted_ids)[0]
    reports[0].documents[first] = "the report's own copy"
    own, _ = cited_texts(reports, str(DEMO / "passages.jsonl"))
    assert own[first] == "the report's own copy" and len(own) == 6
