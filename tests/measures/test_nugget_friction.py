"""The RAG organizer's friction list of issue 20, each tried as a user would."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from exam_eval.io.banks import write_bank
from exam_eval.io.bank_items import make_item_id, BankItem
from exam_eval.io.grades import Grade
from exam_eval.io.reports import Report, ReportSentence, sentence_id
from refusals import one_line_refusal


def _fixture(tmp_path):
    bank = [BankItem("q1", make_item_id("q1", t), "nugget", t, importance=imp)
            for t, imp in (("alpha beta", "vital"), ("gamma delta", None))]
    write_bank(bank, str(tmp_path / "bank.jsonl"))
    reports = tmp_path / "runs.jsonl"
    with reports.open("w") as fh:
        for run in ("runA", "runB"):
            fh.write(json.dumps({"metadata": {"run_id": run, "topic_id": "q1", "team_id": "t"},
                                 "responses": [{"text": "alpha beta here.", "citations": [0]}],
                                 "references": ["d1"]}) + "\n")
    return bank, reports


def _grades(tmp_path, bank, reports_path, parse_ok=True):
    from exam_eval.io.grades import grade_line
    from exam_eval.io.reports import read_reports

    lines = []
    for r in read_reports([str(reports_path)]):
        for s in r.sentences:
            for item in bank:
                lines.append(Grade(r.topic_id, s.doc_id, item.item_id, "nugget", 2 if parse_ok else None, None,
                                   "['support']", parse_ok, "m", "nuggetizer-assign"))
    path = tmp_path / "grades.jsonl"
    path.write_text("".join(grade_line(g) for g in lines))
    return path, lines


def test_trec_eval_directory_output_can_be_rewritten(tmp_path, run_cli):
    bank, reports = _fixture(tmp_path)
    grades, _ = _grades(tmp_path, bank, reports)
    out = tmp_path / "te"
    out.mkdir()
    for _ in range(2):  # an existing directory, and a second run over its files
        res = run_cli("exam-nuggets", "score", "--format", "trec_eval", "--reports", reports,
                      "--bank", tmp_path / "bank.jsonl", grades, "-o", out)
        assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["runA.txt", "runB.txt"]


def test_qrels_source_follows_the_grades_given(tmp_path, run_cli):
    bank, reports = _fixture(tmp_path)
    grades, _ = _grades(tmp_path, bank, reports)
    res = run_cli("exam-nuggets", "qrels", "--reports", reports, grades)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["q1", "0", "d1", "2"]


def test_every_documented_track_spec_exists(run_cli):
    from exam_eval.io.track_specs import SPECS

    res = run_cli("exam-nuggets", "score", "--help")
    named = res.stdout.split("track spec")[1].split(")")[0]
    assert "rag24" not in named and all(name in " ".join(named.split()) for name in SPECS)


def test_bank_export_says_what_it_defaulted(tmp_path, run_cli):
    _fixture(tmp_path)
    res = run_cli("exam-nuggets", "bank", "--to", "nuggetizer", tmp_path / "bank.jsonl", "-o", tmp_path / "nz.jsonl")
    assert res.returncode == 0
    assert "1 of 2 items have no importance and are written as vital" in res.stderr
    assert "1 topics have no query text" in res.stderr


def test_embedding_refuses_the_nuggetizer_prompt(tmp_path, run_cli):
    _, reports = _fixture(tmp_path)
    res = run_cli("exam-grade", "--reports", reports, "--bank", tmp_path / "bank.jsonl", "--backend", "embedding", "--prompt", "nugget-selfrating",
                  "--prompt", "nuggetizer-assign", "--topics", "-", "-o", tmp_path / "g.jsonl", input="q1\tq\n")
    assert res.returncode == 1 and "cannot run 'nuggetizer-assign'" in res.stderr
    assert not (tmp_path / "g.jsonl").exists()


def test_chat_steps_refuse_scoring_back_ends():
    from exam_eval.backends.factory import make_client
    from exam_eval.errors import UsageError

    with pytest.raises(UsageError, match="cannot run the AutoNuggetizer's prompts"):
        make_client("embedding", "chat")


def test_library_warns_where_the_command_warns(tmp_path):
    from exam_eval import api
    from exam_eval.io.reports import read_reports

    bank, reports = _fixture(tmp_path)
    _, lines = _grades(tmp_path, bank, reports, parse_ok=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api.nugget_scores(read_reports([str(reports)]), lines, bank)
    assert any("unparsed grades" in str(w.message) for w in caught)


def test_nuggetizer_assign_defaults_to_the_whole_report():
    from exam_eval.grading.report_units import default_unit

    assert default_unit("nuggetizer-assign") == "report"
    assert default_unit("nugget-selfrating") == "sentence"


def test_autojudge_offline_stand_in(tmp_path, monkeypatch):
    import nltk

    from exam_eval import autojudge_offline

    from nltk.corpus.reader import StopwordsCorpusReader
    from nltk.corpus.util import LazyCorpusLoader

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nowhere")])
    # a fresh loader, as in a new process: nltk's stopwords loader binds to the folder it
    # first found, and another test of this worker may have imported autojudge in-process
    # over its own stand-in folder (since deleted)
    monkeypatch.setattr(nltk.corpus, "stopwords",
                        LazyCorpusLoader("stopwords", StopwordsCorpusReader, r"(?!README|\.).*", encoding="utf8"))
    root = autojudge_offline.prepare()
    assert root == tmp_path / "exam_eval" / "nltk_data"
    from nltk.corpus import stopwords

    assert "the" in stopwords.words("english")
    assert autojudge_offline.prepare() is None  # found now: nothing more to do


def test_report_ids_are_what_assign_writes():
    r = Report("run", "q1", None, (ReportSentence(sentence_id("run", "q1", 1, "a."), 1, "a."),))
    assert r.doc_id.startswith("run/q1/report-")


def test_every_validation_problem_of_a_report_is_listed(tmp_path, run_cli):
    bank, _ = _fixture(tmp_path)
    bad = tmp_path / "bad.jsonl"
    with bad.open("w") as fh:
        fh.write(json.dumps({"metadata": {"run_id": "r", "topic_id": "q1", "team_id": "t"},
                             "responses": [{"text": "fine.", "citations": [0]}], "references": ["d1"]}) + "\n")
        fh.write(json.dumps({"metadata": {"run_id": "r", "topic_id": "q1", "team_id": "t"},
                             "responses": [{"text": "a.", "citations": [3]}, {"text": "b.", "citations": [5]},
                                           {"text": " ", "citations": []}],
                             "references": ["d1"]}) + "\n")
    for prog, args in (("exam-nuggets", ("score", "--reports", bad, "--bank", tmp_path / "bank.jsonl", os.devnull)),
                       ("exam-grade", ("--reports", bad, "--bank", tmp_path / "bank.jsonl", "--backend", "embedding", "--prompt", "nugget-selfrating",
                                       "--no-cache", "-o", tmp_path / "g.jsonl"))):
        res = run_cli(prog, *args)
        assert res.returncode == 2, res.stderr
        lines = res.stderr.splitlines()
        assert lines[0] == (f"{prog}: {bad}:2: responses[0] cites reference index 3, but 'references' has 1 "
                            "entries (and 2 more problems)")
        assert lines[1] == f"{prog}: {bad}:2: also: responses[1] cites reference index 5, but 'references' has 1 entries"
        assert lines[2].startswith(f"{prog}: {bad}:2: also: responses[2].text is blank")
        assert len(lines) == 3
        assert not (tmp_path / "g.jsonl").exists()


def test_the_library_error_holds_every_problem(tmp_path):
    from exam_eval.errors import InputError
    from exam_eval.io.reports import parse_report

    obj = {"metadata": {"run_id": "r", "topic_id": "q1", "team_id": "t"},
           "responses": [{"text": "a.", "citations": [3]}, {"text": "b.", "citations": [5]}], "references": ["d1"]}
    with pytest.raises(InputError) as info:
        parse_report(obj, source="x.jsonl", line=7)
    assert info.value.reason.endswith("(and 1 more problem)")
    assert info.value.also == ("responses[1] cites reference index 5, but 'references' has 1 entries",)
    assert info.value.more_lines() == ["x.jsonl:7: also: responses[1] cites reference index 5, but 'references' "
                                       "has 1 entries"]


def test_progress_counts_cached_and_repeated_prompts(tmp_path):
    # a rerun answered from the cache, and two reports with the same text, used to leave
    # the progress bar short of its total (0/1, 6/9)
    from exam_eval.backends.chat import ScriptedChat
    from exam_eval.grading.asking import Ask, Asker, parse_python_list
    from exam_eval.grading.cache import GradeCache

    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"match": ["x"], "output": "['a']"}) + "\n")
    chat = ScriptedChat(script=str(script))
    asks = [Ask("k1", [{"role": "user", "content": "x1"}]), Ask("k1", [{"role": "user", "content": "x1"}]),
            Ask("k2", [{"role": "user", "content": "x2"}])]
    for expected_calls in (2, 0):  # first run, then the rerun from the cache
        done: list[int] = []
        cache = GradeCache(str(tmp_path / "c.sqlite"))
        asker = Asker(chat, parse_python_list, cache=cache, on_chunk=done.append)
        before = chat.calls
        answers = asker.ask(asks)
        cache.close()
        assert chat.calls - before == expected_calls
        assert sum(done) == len(asks) and answers["k1"].value == ["a"]


def test_nuggetize_says_when_the_model_gave_no_nuggets(tmp_path, run_cli):
    # a model too small for the prompt (SmolLM2-135M repeats the documents) used to end
    # in "no topic has documents with text"
    (tmp_path / "t.tsv").write_text("q1\thow do bees make honey\n")
    (tmp_path / "p.jsonl").write_text(json.dumps({"doc_id": "d1", "text": "Bees make honey from nectar."}) + "\n")
    (tmp_path / "q.qrels").write_text("q1 0 d1 2\n")
    (tmp_path / "s.jsonl").write_text(json.dumps({"match": ["NuggetizeLLM"], "output": "[1] Bees make honey"}) + "\n")
    out = tmp_path / "bank.jsonl"
    res = run_cli("exam-genq", "nuggetize", tmp_path / "t.tsv", "--qrels", tmp_path / "q.qrels", "--passages",
                  tmp_path / "p.jsonl", "--backend", "scripted", "--script", tmp_path / "s.jsonl", "--retries", "1",
                  "--no-cache", "-o", out)
    assert res.returncode == 3, res.stderr
    assert "the model's answers gave no nuggets for any of 1 topics (1 windows did not parse); nothing written" \
        in res.stderr
    assert not out.exists()


def test_qrels_with_every_grade_unparsed_is_one_line(tmp_path, run_cli):
    """The unparsed-grades notice came before the refusal: exit 2 is one line."""
    bank, reports = _fixture(tmp_path)
    grades, _ = _grades(tmp_path, bank, reports, parse_ok=False)
    res = run_cli("exam-nuggets", "qrels", "--reports", reports, grades)
    assert one_line_refusal(res) == f"exam-nuggets: {grades}: no cited document has the grades its label needs"
    assert res.stdout == ""
