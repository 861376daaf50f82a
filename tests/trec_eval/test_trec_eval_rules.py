"""trec_eval 9.0.8 rules that the recorded corpus pins down, checked here on small inputs
against independent computations (pytrec_eval called directly, glibc's own printf)."""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import pytest
import pytrec_eval

from exam_eval.trec_eval.evaluate import _float
from refusals import one_line_refusal
from test_trec_eval_compat import parse_output, write_case


def lines_of(stdout: str) -> list[list[str]]:
    return [line.split("\t") for line in stdout.splitlines()]


QRELS = {"1": {"a": 2, "b": 0, "c": 1, "d": -1}, "2": {"e": 1, "f": 3, "g": 0}, "3": {"h": 1}}
RUN = {"1": {"a": 3.0, "x": 2.5, "d": 2.0, "c": 1.0}, "2": {"g": 2.0, "f": 1.0, "y": 0.5}}


def test_gm_measures_only_on_the_all_line(tmp_path, run_cli):
    qp, rp = write_case(tmp_path, QRELS, RUN)
    res = run_cli("exam-qrels", "-q", "-m", "gm_map", "-m", "map", "-m", "gm_bpref", qp, rp)
    assert res.returncode == 0, res.stderr
    rows = lines_of(res.stdout)
    assert [r[0].strip() for r in rows if r[1] != "all"] == ["map", "map"]
    assert [r[0].strip() for r in rows if r[1] == "all"] == ["map", "gm_map", "gm_bpref"]
    ap = pytrec_eval.RelevanceEvaluator(QRELS, {"map"}).evaluate(RUN)
    expected = math.exp(sum(math.log(max(ap[q]["map"], 1e-5)) for q in ("1", "2")) / 2)
    assert parse_output(res.stdout)[("gm_map", "all")] == "%6.4f" % expected


def test_runid_is_the_tag_of_the_last_line(tmp_path, run_cli):
    qp, _ = write_case(tmp_path, QRELS, RUN)
    rp = tmp_path / "tags.run"
    rp.write_text("1 Q0 a 1 3 first\n2 Q0 f 1 1 second\n1 Q0 c 2 1 third\n")
    res = run_cli("exam-qrels", "-m", "runid", qp, rp)
    assert res.stdout == "runid                 \tall\tthird\n"


@pytest.mark.parametrize("value", [float("nan"), -float("nan"), -0.0, 1 / 3, 2.00005, float("inf"), -12.5])
def test_float_format_is_glibc_printf(value):
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    buf = ctypes.create_string_buffer(64)
    libc.snprintf(buf, 64, b"%6.4f", ctypes.c_double(value))
    assert _float(value) == buf.value.decode()


def test_nan_from_trec_eval_prints_as_minus_nan(tmp_path, run_cli):
    # with -J and no judged document retrieved, iprec_at_recall divides 0 by 0
    qrels, run = {"1": {"a": 1, "b": 0}}, {"1": {"x": 1.0, "y": 0.5}}
    qp, rp = write_case(tmp_path, qrels, run)
    res = run_cli("exam-qrels", "-q", "-J", "-m", "iprec_at_recall.0", qp, rp)
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"iprec_at_recall"}, judged_docs_only_flag=True).evaluate(run)
    value = direct["1"]["iprec_at_recall_0.00"]
    assert math.isnan(value)
    expected = "-nan" if math.copysign(1.0, value) < 0 else "nan"
    assert [r[2].strip() for r in lines_of(res.stdout)] == [expected, expected]


def test_complete_num_rel_counts_every_qrels_judgment_of_label_1_or_more(tmp_path, run_cli):
    qp, rp = write_case(tmp_path, QRELS, RUN)
    res = run_cli("exam-qrels", "-c", "-l", "2", "-m", "num_rel", "-m", "num_q", qp, rp)
    got = parse_output(res.stdout)
    assert got[("num_rel", "all")] == str(sum(lab >= 1 for docs in QRELS.values() for lab in docs.values()))
    assert got[("num_q", "all")] == "3"
    # without -c: the evaluated queries at the -l level, as pytrec_eval counts them
    res = run_cli("exam-qrels", "-l", "2", "-m", "num_rel", qp, rp)
    direct = pytrec_eval.RelevanceEvaluator(QRELS, {"num_rel"}, relevance_level=2).evaluate(RUN)
    assert parse_output(res.stdout)[("num_rel", "all")] == str(int(sum(v["num_rel"] for v in direct.values())))


@pytest.mark.parametrize("nickname", ["all_trec", "official", "set"])
def test_nicknames_are_trec_eval_s_own_lists(tmp_path, run_cli, nickname):
    qp, rp = write_case(tmp_path, QRELS, RUN)
    res = run_cli("exam-qrels", "-q", "-m", nickname, qp, rp)
    assert res.returncode == 0, res.stderr
    roots = set()
    for name, _, _ in lines_of(res.stdout):
        name = name.strip()
        roots.add(next((m for m in sorted(pytrec_eval.supported_measures, key=len, reverse=True)
                        if name == m or name.startswith(m + "_")), name))
    # pytrec_eval bundles trec_eval 9.0.8 and exposes its nickname table
    assert roots == set(pytrec_eval.supported_nicknames[nickname])


def test_utility_against_pytrec_eval(tmp_path, run_cli):
    qp, rp = write_case(tmp_path, QRELS, RUN)
    direct = pytrec_eval.RelevanceEvaluator(QRELS, {"utility", "num_ret", "num_rel", "num_rel_ret"}).evaluate(RUN)
    res = run_cli("exam-qrels", "-q", "-m", "utility", qp, rp)
    got = parse_output(res.stdout)
    for q in ("1", "2"):
        assert got[("utility", q)] == "%6.4f" % direct[q]["utility"]
    res = run_cli("exam-qrels", "-q", "-m", "utility.2,-0.5,-1,0", qp, rp)
    got = parse_output(res.stdout)
    for q in ("1", "2"):
        v = direct[q]
        expected = 2 * v["num_rel_ret"] - 0.5 * (v["num_ret"] - v["num_rel_ret"]) - (v["num_rel"] - v["num_rel_ret"])
        assert got[("utility_2,-0.5,-1,0", q)] == "%6.4f" % expected
    # other than 4 coefficients: trec_eval stops at the first query ("Can't calculate
    # measure 'utility'", exit 4), and exam-qrels refuses the input so, in one line
    res = run_cli("exam-qrels", "-m", "utility.1,2", qp, rp)
    line = one_line_refusal(res, "exam-qrels")
    assert res.stdout == ""
    assert "Can't calculate measure 'utility'" in line and "4 coefficients, not 2" in line


def test_relstring_per_query_only(tmp_path, run_cli):
    qrels = {"1": {"a": 2, "b": -1, "c": 12, "e": 0}}
    run = {"1": {"a": 4.0, "x": 3.0, "b": 2.0, "c": 1.0, "e": 0.5}}
    qp, rp = write_case(tmp_path, qrels, run)
    # trec_eval's m_relstring.c: label digit, '-' not in the pool, '.' in the pool unjudged, '>' above 9
    res = run_cli("exam-qrels", "-q", "-m", "relstring", "-m", "num_ret", qp, rp)
    assert lines_of(res.stdout) == [["num_ret               ", "1", "5"], ["relstring             ", "1", "'2-.>0'"],
                                    ["num_ret               ", "all", "5"]]
    res = run_cli("exam-qrels", "-q", "-J", "-m", "relstring.2", qp, rp)
    assert lines_of(res.stdout) == [["relstring_2           ", "1", "'2>'"]]


def test_first_query_with_only_negative_labels_is_refused_like_trec_eval(tmp_path, run_cli):
    qrels = {"1": {"a": -1, "b": -1}, "2": {"c": 1}}
    run = {"1": {"a": 1.0}, "2": {"c": 1.0}}
    qp, rp = write_case(tmp_path, qrels, run)
    out = tmp_path / "out.txt"
    res = run_cli("exam-qrels", "-m", "P.5", "-m", "map", "-o", out, qp, rp)
    line = one_line_refusal(res, "exam-qrels")
    assert res.stdout == ""
    assert "Can't calculate measure 'map'" in line and "query 1" in line
    assert sorted(tmp_path.iterdir()) == sorted([qp, rp])   # no output, no temp file
    # only runid / num_q: trec_eval computes nothing per query, so nothing to refuse
    res = run_cli("exam-qrels", "-m", "num_q", qp, rp)
    assert res.returncode == 0 and res.stdout == "num_q                 \tall\t2\n"


@pytest.mark.parametrize("labels", [{"d": -1}, {"d": -2, "e": -3}])
def test_later_query_with_only_negative_labels_scores_as_no_relevant_document(tmp_path, run_cli, labels):
    # trec_eval 9.0.8 segfaults on the second form (and pytrec_eval on both); we answer
    # what a query without relevant documents scores
    qrels = {"1": {"a": 1}, "2": labels}
    run = {"1": {"a": 1.0}, "2": {"d": 2.0, "z": 1.0}}
    qp, rp = write_case(tmp_path, qrels, run)
    res = run_cli("exam-qrels", "-q", "-m", "num_ret", "-m", "num_rel", "-m", "num_rel_ret", "-m", "map",
                  "-m", "P.5", "-m", "recip_rank", "-m", "ndcg", qp, rp)
    assert res.returncode == 0, res.stderr
    got = parse_output(res.stdout)
    assert [got[(m, "2")] for m in ("num_ret", "num_rel", "num_rel_ret")] == ["2", "0", "0"]
    assert all(got[(m, "2")] == "0.0000" for m in ("map", "P_5", "recip_rank", "ndcg"))
    assert got[("map", "all")] == "%6.4f" % 0.5


def test_measures_for_other_judgment_formats_are_refused(tmp_path, run_cli):
    # trec_eval exits 4 ("Can't calculate measure") on the first scored query: a refusal
    # of this input, exit 2 here; with no query to score it says "No queries" instead
    qp, rp = write_case(tmp_path, QRELS, RUN)
    for flags, first in ((["-m", "prefs_simp"], "prefs_simp"), (["-m", "all_prefs"], "prefs_num_prefs_poss"),
                         (["-m", "P_avgjg", "-m", "P.5"], "P_avgjg"),
                         (["-R", "qrels_jg", "-m", "qrels_jg", "-m", "map"], "map")):
        res = run_cli("exam-qrels", *flags, qp, rp)
        line = one_line_refusal(res, "exam-qrels")
        assert res.stdout == ""
        assert f"Can't calculate measure '{first}'" in line
    other = tmp_path / "other.run"
    other.write_text("77 Q0 a 1 1 t\n")
    res = run_cli("exam-qrels", "-m", "prefs_simp", qp, other)
    assert res.returncode == 2 and "No queries with both results and relevance info" in res.stderr


@pytest.mark.parametrize("spec, name", [("set_F.0.5", "set_F_0.5"), ("11pt_avg.0.2,0.5,0.8", "11pt_avg_0.2,0.5,0.8")])
def test_single_value_measures_with_parameters(tmp_path, run_cli, spec, name):
    # trec_eval names them root_PARAMS (meas_init.c: append_string of the parameter text)
    qp, rp = write_case(tmp_path, QRELS, RUN)
    direct = pytrec_eval.RelevanceEvaluator(QRELS, {spec}).evaluate(RUN)
    default = pytrec_eval.RelevanceEvaluator(QRELS, {spec.split(".")[0]}).evaluate(RUN)
    assert any(direct[q] != default[q] for q in direct)   # the parameter matters here
    res = run_cli("exam-qrels", "-q", "-m", spec, qp, rp)
    assert res.returncode == 0, res.stderr
    got = parse_output(res.stdout)
    root = spec.split(".")[0]
    for q in ("1", "2"):
        assert got[(name, q)] == "%6.4f" % direct[q][root]
    assert got[(name, "all")] == "%6.4f" % ((direct["1"][root] + direct["2"][root]) / 2)


@pytest.mark.parametrize("root", ["ndcg", "ndcg_rel", "Rndcg", "G"])
def test_per_level_gains_equal_relabelled_qrels(tmp_path, run_cli, root):
    # level=gain pairs give those levels those gains: the same as the labels rewritten to
    # the gains, which pytrec_eval scores with its default (label = gain)
    qp, rp = write_case(tmp_path, QRELS, RUN)
    res = run_cli("exam-qrels", "-q", "-m", f"{root}.1=4,2=8", qp, rp)
    assert res.returncode == 0, res.stderr
    relabelled = {q: {d: {1: 4, 2: 8}.get(lab, lab) for d, lab in docs.items()} for q, docs in QRELS.items()}
    direct = pytrec_eval.RelevanceEvaluator(relabelled, {root}).evaluate(RUN)
    got = parse_output(res.stdout)
    for q in ("1", "2"):
        assert got[(f"{root}_1=4,2=8", q)] == "%6.4f" % direct[q][root]


@pytest.mark.parametrize("gains", ["1=4,2", "1=4,,2=3", "1=2=3", ",1=3"])
def test_malformed_gain_pairs_are_refused_in_one_line(tmp_path, run_cli, gains):
    # trec_eval: "malformed pair parameters"; pytrec_eval's C code would crash on them
    qp, rp = write_case(tmp_path, QRELS, RUN)
    res = run_cli("exam-qrels", "-m", f"ndcg.{gains}", qp, rp)
    line = one_line_refusal(res, "exam-qrels", code=1)
    assert res.stdout == ""
    assert "malformed pair parameters" in line


def test_max_docs_zero_scores_an_empty_ranking(tmp_path, run_cli):
    # trec_eval -M 0 evaluates every query with nothing retrieved (pytrec_eval alone would
    # skip them): counts 0, num_rel from the qrels, and iprec_at_recall's 0/0, which the
    # recorded trec_eval prints as -nan when -J leaves nothing retrieved (case 18 of
    # ../shared/data/trec_eval_parity/cases-9.0.8.jsonl.gz)
    qp, rp = write_case(tmp_path, QRELS, RUN)
    res = run_cli("exam-qrels", "-q", "-M", "0", "-m", "num_ret", "-m", "num_rel", "-m", "map",
                  "-m", "iprec_at_recall.0", "-m", "relstring", qp, rp)
    assert res.returncode == 0, res.stderr
    got = {(r[0].strip(), r[1]): r[2] for r in lines_of(res.stdout)}
    for q in ("1", "2"):
        assert got[("num_ret", q)] == "0" and got[("map", q)] == "0.0000"
        assert got[("num_rel", q)] == str(sum(lab >= 1 for lab in QRELS[q].values()))
        assert got[("relstring", q)] == "''"
        assert got[("iprec_at_recall_0.00", q)] == "  -nan"


def test_run_fields_after_the_sixth_are_ignored(tmp_path, run_cli):
    # trec_eval's parse_results_line reads six fields and skips the rest of the line
    # (its own test/results.trunc has "STANDARD more junk at end of lines.")
    qp, rp = write_case(tmp_path, QRELS, RUN)
    extra = tmp_path / "extra.run"
    extra.write_text("".join(f"{line}\tmore junk\t at end \r\n" for line in rp.read_text().splitlines()))
    plain = run_cli("exam-qrels", "-q", "-m", "all_trec", qp, rp)
    junk = run_cli("exam-qrels", "-q", "-m", "all_trec", qp, extra)
    assert junk.returncode == 0, junk.stderr
    assert junk.stdout == plain.stdout and "runid                 \tall\ttag\n" in junk.stdout
    short = tmp_path / "short.run"
    short.write_text("1 Q0 a 1 3\n")
    res = run_cli("exam-qrels", qp, short)
    assert res.returncode == 2 and f"{short}:1: expected 6 fields" in res.stderr


@pytest.mark.parametrize("text", ["23.4", " 7", "-3x", "+2", "x", "", ".5", "1e3", "-0", "1E-2z",
                                  "  +.25e+1", "inf", "-Infinity", "nan", "9" * 20, "007", "\t12abc", "5.", "e5"])
def test_parameters_and_levels_are_read_as_libc_reads_them(text):
    # trec_eval reads -m parameters, labels and levels with atol / atof
    from exam_eval.trec_eval.c_numbers import c_atof, c_atol

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.atof.restype = ctypes.c_double
    libc.atol.restype = ctypes.c_long
    raw = text.encode()      # (hexadecimal floats, which atof also reads, are not spelled in TREC files)
    expected = libc.atof(raw)
    got = c_atof(text)
    assert got == expected or (math.isnan(got) and math.isnan(expected))
    if len(text.strip()) < 19:        # beyond a long, atol's result is undefined
        assert c_atol(text) == libc.atol(raw)
