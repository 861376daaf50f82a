"""exam_eval.api against the commands and against hand computations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exam_eval import api
from exam_eval.grading.grade_files import read_grades
from exam_eval.io.passages import read_passages
from exam_eval.io.reports import reports_from_run
from exam_eval.trec_eval.trec_files import read_run
from child_env import ChildEnv

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
ENV = ChildEnv(PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")


def cli(prog, *args):
    cmd = [sys.executable, "-c", f"import exam_eval.commands.{prog} as m; m.main()", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api")
    texts = read_passages(str(DEMO / "passages.jsonl"))
    objs = [o for name in ("good", "poor") for o in
            reports_from_run(name, read_run(str(DEMO / f"{name}.run")), texts, depth=3)]
    (tmp / "reports.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objs))
    # the demo nuggets with importance: every third one okay
    bank = tmp / "nuggets.jsonl"
    lines = DEMO.joinpath("nuggets.jsonl").read_text().splitlines()
    bank.write_text("".join(json.dumps(dict(json.loads(x), importance="okay" if i % 3 == 0 else "vital")) + "\n"
                            for i, x in enumerate(lines)))
    return tmp, objs, bank


def test_grade_equals_exam_grade(setup):
    tmp, objs, bank = setup
    grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    out = tmp / "cli.jsonl"
    cli("grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--bank", bank, "--reports",
        tmp / "reports.jsonl", "--no-cache", "-o", out)
    ours = {g.key: (g.grade, g.parse_ok) for g in grades}
    theirs = {g.key: (g.grade, g.parse_ok) for g in read_grades(str(out))}
    assert ours == theirs and len(ours) == len(grades)


def test_grade_output_resumes(setup, tmp_path):
    _, objs, bank = setup
    out = tmp_path / "g.jsonl"
    first = api.grade(objs[:5], bank=str(bank), prompt="nugget-selfrating", backend="scripted", output=str(out))
    n = len(out.read_text().splitlines())
    assert n == len(first)
    both = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted", output=str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == len(both) > n  # the first five reports were not graded again
    assert len({(json.loads(x)["doc_id"], json.loads(x)["item_id"]) for x in lines}) == len(lines)


def test_grade_refuses_to_resume_grades_of_another_engine(setup, tmp_path, monkeypatch):
    """As exam-grade: torch grades are not resumed by CTranslate2 int8 (nor the reverse)."""
    pytest.importorskip("torch")
    from tiny_models import make_tiny_t5

    from exam_eval.errors import InputError

    monkeypatch.setenv("EXAM_EVAL_CT2_CACHE", str(tmp_path / "ct2"))
    _, objs, bank = setup
    model = str(make_tiny_t5(tmp_path / "t5"))
    out = tmp_path / "g.jsonl"
    kw = dict(bank=str(bank), prompt="nugget-selfrating", backend="hf-seq2seq", model=model, device="cpu",
              output=str(out))
    first = api.grade(objs[:1], engine="torch", **kw)
    before = out.read_bytes()
    assert first and len(before.splitlines()) == len(first) and {g.engine for g in first} == {"torch"}
    pytest.importorskip("ctranslate2")
    with pytest.raises(InputError) as err:
        api.grade(objs[:1], engine="ctranslate2", compute_type="int8", **kw)
    assert err.value.path == str(out)
    assert err.value.reason.startswith("holds grades of this model and prompt made with other settings (computed by "
                                       "torch; this run uses ctranslate2/int8"), err.value.reason
    assert out.read_bytes() == before
    assert api.grade(objs[:1], engine="torch", **kw) == first and out.read_bytes() == before


def _by_hand(objs, grades, bank_path):
    """All / Vital / Weighted and strict variants from the grades, written out plainly."""
    items: dict[str, list[tuple[str, str]]] = {}
    for line in Path(bank_path).read_text().splitlines():
        o = json.loads(line)
        items.setdefault(o["query_id"], []).append((o["item_id"], o["importance"]))
    best: dict[tuple[str, str], int] = {}
    for g in grades:
        k = (g.doc_id, g.item_id)
        best[k] = max(best.get(k, -1), g.grade)
    from exam_eval.io.reports import sentence_id

    out = {}
    for o in objs:
        run, topic = o["metadata"]["run_id"], o["metadata"]["topic_id"]
        sids = [sentence_id(run, topic, n, s["text"]) for n, s in enumerate(o["responses"], 1)]
        scores = {}
        for strict in (False, True):
            credit = []
            for item, imp in items[topic]:
                top = max((best.get((s, item), -1) for s in sids), default=-1)
                c = 1.0 if top >= 4 else (0.0 if strict else 0.5) if top >= 2 else 0.0
                credit.append((imp, c))
            sfx = "_strict" if strict else ""
            scores["nugget_all" + sfx] = sum(c for _, c in credit) / len(credit)
            vital = [c for imp, c in credit if imp == "vital"]
            scores["nugget_vital" + sfx] = sum(vital) / len(vital)
            w = [(1.0 if imp == "vital" else 0.5, c) for imp, c in credit]
            scores["nugget_weighted" + sfx] = sum(a * c for a, c in w) / sum(a for a, _ in w)
            if not strict:
                scores["exam_cover"] = sum(c == 1.0 for _, c in credit) / len(credit)
        out[(run, topic)] = scores
    return out


def test_nugget_scores_by_hand_and_as_exam_nuggets_score(setup):
    tmp, objs, bank = setup
    grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    per, summary = api.nugget_scores(objs, grades, str(bank))
    hand = _by_hand(objs, grades, bank)
    assert per.keys() == hand.keys()
    for key, values in hand.items():
        for m, v in values.items():
            assert per[key][m] == pytest.approx(v), (key, m)
    levels = {v for vals in hand.values() for v in vals.values()}
    assert len(levels) > 3  # the grades spread over support levels: the check has teeth
    for run in ("good", "poor"):
        mine = [vals["nugget_vital"] for (r, _), vals in hand.items() if r == run]
        assert summary[run]["nugget_vital"] == pytest.approx(sum(mine) / len(mine))
    # the command's leaderboard from the same grades
    gfile = tmp / "api.jsonl"
    gfile.write_text("".join(json.dumps(g.to_json()) + "\n" for g in grades))
    table = cli("nuggets", "score", "--reports", tmp / "reports.jsonl", "--bank", bank, "--format", "table",
                gfile).splitlines()
    header = table[0].split("\t")
    for row in table[1:]:
        cells = row.split("\t")
        for m, v in zip(header[1:], cells[1:]):
            if m in api.NUGGET_MEASURES and m != "n_exam_cover":
                assert float(v) == pytest.approx(summary[cells[0]][m], abs=5.1e-5)  # 4 decimals, (cells[0], m)


def test_qrels_equal_exam_qrels_and_citation_qrels_by_hand(setup):
    tmp, objs, bank = setup
    grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    gfile = tmp / "q.jsonl"
    gfile.write_text("".join(json.dumps(g.to_json()) + "\n" for g in grades))
    lines = cli("qrels", gfile).splitlines()
    got = {(q, d): int(lab) for q, _, d, lab in (x.split() for x in lines)}
    mine = api.qrels(grades)
    assert got == {(q, d): v for q, docs in mine.items() for d, v in docs.items()}
    # citation qrels: each cited passage gets the best level of the sentences citing it
    best: dict[str, int] = {}
    for g in grades:
        best[g.doc_id] = max(best.get(g.doc_id, 0), g.grade)
    from exam_eval.io.reports import sentence_id

    expected: dict[tuple[str, str], int] = {}
    for o in objs:
        run, topic = o["metadata"]["run_id"], o["metadata"]["topic_id"]
        for n, s in enumerate(o["responses"], 1):
            lvl = 2 if best.get(sentence_id(run, topic, n, s["text"]), 0) >= 4 else \
                1 if best.get(sentence_id(run, topic, n, s["text"]), 0) >= 2 else 0
            doc = o["references"][s["citations"][0]]
            expected[(topic, doc)] = max(expected.get((topic, doc), 0), lvl)
    cq = api.citation_qrels(objs, grades)
    assert {(q, d): v for q, docs in cq.items() for d, v in docs.items()} == expected


def test_as_reports_and_queries(tmp_path):
    (rep,) = api.as_reports([{"metadata": {"team_id": "t", "run_id": "r", "narrative_id": 5},
                              "answer": [{"text": "x", "citations": ["d"]}]}])
    assert rep.topic_id == "5" and rep.sentences[0].citations[0].doc_id == "d"
    assert api.as_queries({1: "one"}) == {"1": "one"}
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({"request_id": "7", "title": "seven"}) + "\n")
    assert api.as_queries(str(f)) == {"7": "seven"}


# -- the commands' refusals, and their results, through the API (a sweep, 2026-11-26) --------

def test_grade_with_output_returns_this_calls_pairs_only(setup, tmp_path):
    """An output already holding the grades of every bank item: a call with one item
    returned them all (its qrels then differed from the same call without output=)."""
    _, objs, bank = setup
    out = tmp_path / "g.jsonl"
    api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted", output=str(out))
    one = {q: its[:1] for q, its in api.read_bank(str(bank)).items()}
    plain = api.grade(objs, bank=one, prompt="nugget-selfrating", backend="scripted")
    resumed = api.grade(objs, bank=one, prompt="nugget-selfrating", backend="scripted", output=str(out))
    assert sorted(g.key for g in resumed) == sorted(g.key for g in plain) and len({g.item_id for g in plain}) == len(one)


def test_grades_of_two_graders_are_refused_as_the_commands_refuse_them(setup):
    import dataclasses

    _, objs, bank = setup
    grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    other = [dataclasses.replace(g, model="another") for g in grades]
    for call in (lambda: api.qrels(grades + other), lambda: api.nugget_scores(objs, grades + other, str(bank)),
                 lambda: api.citation_qrels(objs, grades + other),
                 lambda: api.cover(grades + other, {"r": {"101": {"d": 1.0}}})):
        with pytest.raises(api.UsageError, match="grades of 2 graders"):
            call()


def test_qrels_take_exam_qrels_defaults_and_refusals(setup, tmp_path):
    tmp, objs, bank = setup
    grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    out = tmp_path / "g.jsonl"
    out.write_text("".join(json.dumps(g.to_json()) + "\n" for g in grades))
    lines = cli("qrels", "--label", "count", out).splitlines()
    got = api.qrels(grades, label="count")  # --min-grade 4 unless given, as exam-qrels
    assert sorted(f"{q} 0 {d} {v}" for q, ds in got.items() for d, v in ds.items()) == sorted(lines)
    for kw in (dict(label="max", min_grade=3), dict(label="binary", min_grade=-1)):
        with pytest.raises(api.UsageError):
            api.qrels(grades, **kw)


@pytest.mark.parametrize("kw, error", [(dict(k=0), "UsageError"), (dict(k=-1), "UsageError"),
                                       (dict(runs={"r": {"101": {"p001": float("nan")}}}), "InputError")])
def test_cover_refuses_what_exam_cover_refuses(setup, kw, error):
    _, objs, bank = setup
    grades = api.grade(objs[:2], bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    runs = kw.pop("runs", {"r": {"101": {"p001": 1.0}}})
    with pytest.raises((api.UsageError, api.InputError)) as caught:
        api.cover(grades, runs, **kw)
    assert type(caught.value).__name__ == error


def test_empty_results_are_the_commands_refusals(setup, tmp_path):
    _, objs, bank = setup
    report_grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted", unit="report")
    with pytest.raises(api.InputError, match="no cited document has the grades its label needs"):
        api.citation_qrels(objs, report_grades)
    grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    with pytest.raises(api.InputError, match="no reports"):
        api.nugget_scores([], grades, str(bank))
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"query_id": "999", "kind": "nugget", "text": "x"}) + "\n")
    with pytest.raises(api.InputError, match="no report is on a topic of the bank"):
        api.nugget_scores(objs, grades, str(other))
    with pytest.raises(api.UsageError, match="default_importance"):
        api.nugget_scores(objs, grades, str(bank), default_importance="high")


def test_wrong_calls_to_grade_are_usage_errors(setup, tmp_path):
    _, objs, bank = setup
    for kw in (dict(unit="para"), dict(prompt=None), dict(reports=str(DEMO))):
        args = dict(bank=str(bank), prompt="nugget-selfrating", backend="scripted") | kw
        with pytest.raises(api.UsageError):
            api.grade(args.pop("reports", objs), **args)
    # as exam-grade --cited-documents without --passages: a usage error naming what to give
    with pytest.raises(api.UsageError, match="cited documents need texts for cited_documents=True: give passages="):
        api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted", cited_documents=True)
    with pytest.raises(api.InputError, match="no such"):
        api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted",
                  output=str(tmp_path / "missing" / "g.jsonl"))


@pytest.mark.parametrize("kw, named", [(dict(batch_size="x"), "option batch_size: expected a whole number >= 0"),
                                       (dict(delay=float("nan")), "option delay: expected a finite number >= 0"),
                                       (dict(delay=-1), "option delay: expected a finite number >= 0")])
def test_back_end_keywords_are_checked_as_the_flags_are(setup, kw, named):
    """They skipped the checks of -O pairs: a ValueError once grading had started."""
    _, objs, bank = setup
    with pytest.raises(api.UsageError, match=named):
        api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted", **kw)


def test_a_back_end_option_for_a_name_takes_text():
    r = subprocess.run([sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()", "--backend",
                        "embedding", "-O", "model=5", "--prompt", "question-selfrating", "--bank",
                        str(DEMO / "questions.jsonl"), "--passages", str(DEMO / "passages.jsonl"),
                        str(DEMO / "good.run"), "--no-cache"], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 1 and r.stderr == "exam-grade: --backend-option model: expected text, got 5\n"


def test_arguments_of_the_wrong_kind_are_usage_errors(setup, tmp_path):
    """Each of these was a TypeError or AttributeError from inside (22 of them in a sweep)."""
    _, objs, bank = setup
    grades = api.grade(objs[:2], bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    base = dict(bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    calls = [
        lambda: api.grade(None, **base),
        lambda: api.grade(objs, **(base | dict(bank={"101": ["a nugget text"]}))),
        lambda: api.grade(objs, **(base | dict(bank=[{"query_id": "101", "text": "x"}]))),
        lambda: api.grade(objs, **(base | dict(output=5))),
        lambda: api.grade(objs, **(base | dict(cache=5))),
        lambda: api.as_queries(["q1", "q2"]),
        lambda: api.read_reports(None),
        lambda: api.read_bank(None),
        lambda: api.qrels(None),
        lambda: api.qrels([{"query_id": "1"}]),
        lambda: api.cover(grades, {"r": {"101": 1.0}}),
        lambda: api.nugget_scores(objs, grades, {"101": "text"}),
        lambda: api.nugget_scores(objs, grades, str(bank), support_min="x"),
        lambda: api.nugget_scores(objs, grades, str(bank), log=5),
        lambda: api.citation_qrels(objs, [{"query_id": "1"}]),
    ]
    for n, call in enumerate(calls):
        with pytest.raises(api.UsageError):
            call()
    assert not list(tmp_path.iterdir())
