"""Listwise nugget assignment against the installed nuggetizer package: the same stand-in
model behind both, the same assignments and scores, no more calls and prompt tokens."""

from __future__ import annotations

import pytest

pytest.importorskip("nuggetizer")

from nuggetizer_stub import CountingModel, nuggetizer_against  # noqa: E402

from exam_eval.backends.chat import EndpointChat  # noqa: E402
from exam_eval.grading.asking import Asker  # noqa: E402
from exam_eval.grading.cache import GradeCache  # noqa: E402
from exam_eval.grading.listwise import assign_reports, messages, parse_labels  # noqa: E402
from exam_eval.io.bank_items import make_item_id, BankItem  # noqa: E402
from exam_eval.io.reports import Report, ReportSentence, sentence_id  # noqa: E402
from exam_eval.measures import nugget_scores as ns  # noqa: E402

QUERY = "how do vaccines train the immune system"
WORDS = ("vaccines contain weakened pathogens antigens trigger antibodies memory cells immune response "
         "booster doses adjuvants strengthen protection herd immunity mrna instructions spike protein").split()


def _nuggets(n: int) -> list[tuple[str, str]]:
    out = []
    for i in range(n):
        text = " ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(2 + i % 3))
        if i % 7 == 3:
            text += " unseen"
        out.append((text + f" n{i}" if i % 5 == 4 else text, "vital" if i % 3 else "okay"))
    return out


def _report(run: str, k: int, extra: str = "") -> Report:
    texts = [" ".join(WORDS[(k * 5 + j * 4 + m) % len(WORDS)] for m in range(6)) + "." for j in range(5)]
    if extra:
        texts[-1] += " " + extra
    sents = tuple(ReportSentence(sentence_id(run, "q1", j + 1, t), j + 1, t) for j, t in enumerate(texts))
    return Report(run, "q1", None, sents)


def _bank(nuggets) -> list[BankItem]:
    return [BankItem("q1", make_item_id("q1", t), "nugget", t, importance=imp) for t, imp in nuggets]


def _exam_eval(url, reports, bank, grades, tmp_path=None, retries=5):
    chat = EndpointChat(model="stub-model", base_url=url, concurrency=4, max_retries=0)
    cache = GradeCache(tmp_path / "cache.sqlite") if tmp_path else None
    asker = Asker(chat, parse_labels, retries=retries, **({"cache": cache} if cache else {}))
    lines, failed = assign_reports(reports, {"q1": bank}, {"q1": QUERY}, asker, grades=grades)
    if cache:
        cache.close()
    return lines, failed, asker.stats


def _theirs(nz, reports, nuggets):
    from nuggetizer.core.types import ScoredNugget

    scored = [ScoredNugget(text=t, importance=imp) for t, imp in nuggets]
    return [nz.assign(QUERY, r.text, scored) for r in reports]


@pytest.mark.parametrize("grades", [3, 2])
def test_same_assignments_scores_calls_and_tokens(grades, monkeypatch):
    from dataclasses import asdict

    from nuggetizer.core.metrics import calculate_nugget_scores
    from nuggetizer.core.types import NuggetAssignMode

    nuggets = _nuggets(30)
    reports = [_report(f"run{k:02d}", k, extra="FLAKY" if k == 3 else "") for k in range(20)]
    reports.append(Report("empty", "q1", None, ()))  # no text: no call, all not_support
    bank = _bank(nuggets)
    mode = NuggetAssignMode.SUPPORT_GRADE_3 if grades == 3 else NuggetAssignMode.SUPPORT_GRADE_2

    with CountingModel() as theirs_model:
        with nuggetizer_against(theirs_model.url, monkeypatch, assigner_mode=mode) as nz:
            theirs = _theirs(nz, reports, nuggets)
    with CountingModel() as ours_model:
        lines, failed, stats = _exam_eval(ours_model.url, reports, bank, grades)

    assert failed == 0
    by_key = {(g.doc_id, g.item_id): g for g in lines}
    labels = {v: k for k, v in {"not_support": 0, "partial_support": 1, "support": 2}.items()}
    seen_levels = set()
    for r, assigned in zip(reports, theirs):
        assert len(assigned) == len(bank)
        for item, a in zip(bank, assigned):
            g = by_key[(r.doc_id, item.item_id)]
            assert g.parse_ok and labels[g.grade] == a.assignment
            seen_levels.add(a.assignment)
    assert seen_levels == ({"support", "partial_support", "not_support"} if grades == 3
                           else {"support", "not_support"})

    th = ns.thresholds_for(ns.scale_of(lines[0].prompt))
    ours = ns.assign(reports, lines, {"q1": bank}, th)
    for a, assigned in zip(ours, theirs):
        mine = ns.report_nugget_scores(a, bank)
        ref = calculate_nugget_scores("q1", [asdict(x) for x in assigned])
        assert mine["nugget_all"] == pytest.approx(ref.all_score, abs=1e-12)
        assert mine["nugget_vital"] == pytest.approx(ref.vital_score, abs=1e-12)
        assert mine["nugget_all_strict"] == pytest.approx(ref.strict_all_score, abs=1e-12)
        assert mine["nugget_vital_strict"] == pytest.approx(ref.strict_vital_score, abs=1e-12)

    # 20 reports x ceil(30/10) windows, plus one re-ask per window of the FLAKY report
    assert theirs_model.calls == 20 * 3 + 3
    assert ours_model.calls <= theirs_model.calls and stats.calls == ours_model.calls
    assert ours_model.prompt_tokens <= theirs_model.prompt_tokens
    assert ours_model.calls == theirs_model.calls and ours_model.prompt_tokens == theirs_model.prompt_tokens


def test_prompt_is_the_nuggetizers(monkeypatch):
    from nuggetizer.core.types import NuggetAssignMode, ScoredNugget

    with CountingModel() as model:
        for grades, mode in ((3, NuggetAssignMode.SUPPORT_GRADE_3), (2, NuggetAssignMode.SUPPORT_GRADE_2)):
            with nuggetizer_against(model.url, monkeypatch, assigner_mode=mode) as nz:
                nuggets = [ScoredNugget(text="weakened pathogens", importance="vital"),
                           ScoredNugget(text="it's \"quoted\"", importance="okay")]
                want = nz._create_assign_prompt(QUERY, "Some passage.\nTwo lines.", nuggets)
            assert messages(QUERY, "Some passage.\nTwo lines.", [n.text for n in nuggets], grades) == want


def test_unparsed_after_retries_is_recorded_not_cached(tmp_path):
    bank = _bank(_nuggets(12))
    reports = [_report("runA", 1, extra="BROKEN"), _report("runB", 2)]
    with CountingModel() as model:
        lines, failed, stats = _exam_eval(model.url, reports, bank, 3, tmp_path, retries=2)
        assert model.calls == 2 * 3 + 2  # runA's two windows: first try and two re-asks
    broken = [g for g in lines if g.doc_id == reports[0].doc_id]
    assert len(broken) == 12 and not any(g.parse_ok for g in broken)
    assert all(g.grade is None and g.answer == "I cannot answer that." for g in broken)
    assert all(g.parse_ok for g in lines if g.doc_id == reports[1].doc_id)
    assert stats.unparsed == 2

    # rerun: the parsed windows come from the cache, the unparsed ones are asked again
    with CountingModel(port=model.port) as model:
        lines2, _, stats2 = _exam_eval(model.url, reports, bank, 3, tmp_path, retries=2)
        assert model.calls == 2 * 3
    assert stats2.from_cache == 2 and [g.to_json() for g in lines2] == [g.to_json() for g in lines]


def test_bank_edit_regrades_only_changed_windows(tmp_path):
    nuggets = _nuggets(25)
    reports = [_report(f"run{k}", k) for k in range(4)]
    with CountingModel() as model:
        _exam_eval(model.url, reports, _bank(nuggets), 3, tmp_path)
        assert model.calls == 4 * 3
    edited = list(nuggets)
    edited[13] = ("booster doses strengthen protection", "vital")  # window 2 of 3
    with CountingModel(port=model.port) as model:
        lines, _, stats = _exam_eval(model.url, reports, _bank(edited), 3, tmp_path)
        assert model.calls == 4  # one window per report
    assert stats.from_cache == 8
    item = make_item_id("q1", "booster doses strengthen protection")
    got = {g.doc_id: g.grade for g in lines if g.item_id == item}
    assert len(got) == 4 and all(g is not None for g in got.values())


def test_failed_calls_are_not_written(tmp_path):
    reports = [_report("runA", 1)]
    chat = EndpointChat(model="m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2)
    asker = Asker(chat, parse_labels)
    lines, failed = assign_reports(reports, {"q1": _bank(_nuggets(5))}, {"q1": QUERY}, asker)
    assert lines == [] and failed == 1 and asker.stats.failed == 1


@pytest.mark.parametrize("text, labels", [
    ("['support', 'Not_Support']", ["support", "not_support"]),
    ("```python\n['partial_support']\n```", ["partial_support"]),
    ("[]", None),  # no labels: asked again
    ("support", None),
    ("['support', 3]", None),
    ("Labels: ['support']", None),
])
def test_parse_labels_reads_as_the_nuggetizer(text, labels):
    assert parse_labels(text) == labels


def _write_inputs(tmp_path) -> list[BankItem]:
    """bank.jsonl (12 nuggets), topics.tsv and runs.jsonl (3 reports) for the commands."""
    import json

    from exam_eval.io.banks import write_bank

    bank = _bank(_nuggets(12))
    write_bank(bank, str(tmp_path / "bank.jsonl"))
    (tmp_path / "topics.tsv").write_text(f"q1\t{QUERY}\n")
    with (tmp_path / "runs.jsonl").open("w") as fh:
        for k in range(3):
            r = _report(f"run{k}", k)
            fh.write(json.dumps({"metadata": {"run_id": r.run_id, "topic_id": "q1", "team_id": "t"},
                                 "responses": [{"text": s.text, "citations": []} for s in r.sentences]}) + "\n")
    return bank


def test_cli_assign_then_score(tmp_path, run_cli):
    import json

    from exam_eval.io.nugget_banks import ASSIGNMENT_LABELS

    bank = _write_inputs(tmp_path)
    args = ["assign", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl",
            "--topics", tmp_path / "topics.tsv", "--model", "stub", "--cache", tmp_path / "c.sqlite",
            "-o", tmp_path / "assign.jsonl", "--assignments", tmp_path / "assign.nz.jsonl"]
    with CountingModel() as model:
        res = run_cli("exam-nuggets", *args, "--base-url", model.url, env={"EXAM_EVAL_PROGRESS": "0"})
        assert res.returncode == 0, res.stderr
        assert model.calls == 3 * 2
    lines = [json.loads(x) for x in (tmp_path / "assign.jsonl").read_text().splitlines()]
    assert len(lines) == 36 and {x["prompt"] for x in lines} == {"nuggetizer-listwise"}
    nz = [json.loads(x) for x in (tmp_path / "assign.nz.jsonl").read_text().splitlines()]
    assert [x["run_id"] for x in nz] == ["run0", "run1", "run2"]
    by = {(x["doc_id"].split("/")[0], x["item_id"]): x["grade"] for x in lines}
    for rec in nz:
        assert [ASSIGNMENT_LABELS[by[(rec["run_id"], i.item_id)]] for i in bank] == \
            [n["assignment"] for n in rec["nuggets"]]
    score = run_cli("exam-nuggets", "score", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl",
                    "--summary-only", "-m", "nugget_all", tmp_path / "assign.jsonl")
    assert score.returncode == 0, score.stderr
    for line in score.stdout.splitlines():
        run, _, _, value = line.split("\t")
        rec = next(x for x in nz if x["run_id"] == run)
        credit = {"support": 1, "partial_support": 0.5, "not_support": 0}
        assert float(value) == pytest.approx(sum(credit[n["assignment"]] for n in rec["nuggets"]) / 12, abs=1e-4)


def test_assignment_file_reads_back_into_score(tmp_path, run_cli):
    """score on the --assignments file gives the numbers score gives on the grades."""
    import json

    _write_inputs(tmp_path)
    with CountingModel() as model:
        res = run_cli("exam-nuggets", "assign", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl",
                      "--topics", tmp_path / "topics.tsv", "--model", "stub", "--base-url", model.url, "--no-cache",
                      "-o", tmp_path / "g.jsonl", "--assignments", tmp_path / "a.jsonl",
                      env={"EXAM_EVAL_PROGRESS": "0"})
        assert res.returncode == 0, res.stderr
    outs = []
    for src in ("g.jsonl", "a.jsonl"):
        res = run_cli("exam-nuggets", "score", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl",
                      "-m", "nugget_all", "-m", "nugget_vital_strict", tmp_path / src)
        assert res.returncode == 0, res.stderr
        outs.append(res.stdout)
    assert outs[0] == outs[1] and len(outs[0].splitlines()) == 3 * 2 * 2  # runs x measures x (q1, all)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"qid": "q1", "run_id": "nope", "nuggets": [{"text": "x", "assignment": "support"}]}) + "\n")
    res = run_cli("exam-nuggets", "score", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl", bad)
    assert res.returncode == 2 and "bad.jsonl:1: no report matches this line" in res.stderr


def test_assignment_file_is_a_leaderboard_for_correlate(tmp_path, run_cli):
    """An assignment file scores as the nuggetizer's calculate_nugget_scores scores it,
    and exam-correlate reads it as a leaderboard."""
    import json

    from nuggetizer.core.metrics import calculate_nugget_scores

    from exam_eval.measures.assignment_scores import leaderboard_from_assignments

    recs = []
    labels = ("support", "partial_support", "not_support", "failed")
    for run in ("a", "b", "c"):
        for q in ("q1", "q2"):
            nuggets = [{"text": f"n{i}", "importance": ("vital", "okay", "failed")[(i + len(run)) % 3],
                        "assignment": labels[(i * (ord(run[0]) - 96) + len(q)) % 4]} for i in range(7)]
            recs.append({"qid": q, "run_id": run, "nuggets": nuggets})
    path = tmp_path / "assign.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    board = leaderboard_from_assignments(path)
    for run in ("a", "b", "c"):
        ref = [calculate_nugget_scores(r["qid"], r["nuggets"]) for r in recs if r["run_id"] == run]
        assert board.rows[run]["nugget_all"] == pytest.approx(sum(m.all_score for m in ref) / 2, abs=1e-12)
        assert board.rows[run]["nugget_vital"] == pytest.approx(sum(m.vital_score for m in ref) / 2, abs=1e-12)
        assert board.rows[run]["nugget_vital_strict"] == pytest.approx(
            sum(m.strict_vital_score for m in ref) / 2, abs=1e-12)
    truth = tmp_path / "truth.tsv"
    truth.write_text("run\tscore\na\t0.1\nb\t0.2\nc\t0.3\n")
    res = run_cli("exam-correlate", "leaderboard", truth, path, "--truth-column", "score", "--pred-column", "nugget_all")
    assert res.returncode == 0, res.stderr
    assert "n\t3" in res.stdout
