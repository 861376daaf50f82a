"""trec_eval's official measures in numpy (trec_eval/official_arrays.py) against pytrec_eval.

pytrec_eval runs trec_eval's own C code; the numpy path must give the same double for
every value, bit for bit, on runs built to hit its corners: tied scores (as C floats, ties
by docno descending), -0.0 against 0.0, docnos that share prefixes or run past 8, 16 and
24 bytes, negative labels (in the pool, unjudged), queries without judgments, judged
queries the run lacks, every cutoff shape, -M and -l. The end-to-end check against the
trec_eval binary is in test_trec_eval_random.py (its default and official measure sets go
through this path whenever the bulk reader takes the file).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from exam_eval.trec_eval.packed_bytes import WordView, decimals, words
from exam_eval.trec_eval.bulk import scan_run
from exam_eval.trec_eval import official_arrays
from exam_eval.trec_eval.registry import parse_measures
from exam_eval.trec_eval.evaluate import evaluate


def _docno(rng: random.Random) -> str:
    shape = rng.random()
    if shape < 0.4:
        return str(rng.randint(0, 400))
    if shape < 0.7:
        return "doc-" + str(rng.randint(0, 60)).zfill(rng.choice([1, 5, 13]))
    if shape < 0.9:
        return "clueweb12-" + "0" * rng.randint(0, 9) + str(rng.randint(0, 30))   # 8, 16, 24 bytes and more
    return rng.choice(["a", "b", "ab", "aa", "b0", "zz", "A", "Z9"])


def _case(rng: random.Random):
    qids = [str(q) for q in rng.sample(range(1, 40), rng.randint(1, 12))]
    lines, qrels = [], {}
    for q in qids:
        n = rng.randint(1, 60)
        docs = list(dict.fromkeys(_docno(rng) for _ in range(n)))
        pool = rng.random()
        for d in docs:
            style = rng.random()
            if style < 0.3:
                score = str(rng.randint(-3, 3))                       # many ties
            elif style < 0.4:
                score = rng.choice(["0", "-0", "0.0", "-0.0", "+0"])  # -0.0 ties with 0.0
            elif style < 0.5:
                score = "%.9f" % (1.0 + rng.randint(0, 3) * 1e-9)     # equal as C floats, not as doubles
            else:
                score = "%.4f" % rng.uniform(-10, 10)
            lines.append(f"{q} Q0 {d} 0 {score} tag")
        if pool < 0.85:   # this query is judged
            judged = rng.sample(docs, rng.randint(0, len(docs))) + [f"unretrieved{k}" for k in range(rng.randint(1, 5))]
            labels = [rng.choice([-2, -1, 0, 0, 1, 2, 3, 4]) for _ in judged]
            if not any(lab >= 0 for lab in labels):
                labels[0] = rng.choice([0, 1])
            qrels[q] = dict(zip(judged, labels))
    for k in range(rng.randint(0, 3)):   # judged queries the run lacks
        qrels[f"absent{k}"] = {"x": 1}
    rng.shuffle(lines)   # interleaved queries
    return ("\n".join(lines) + "\n").encode(), qrels


MEASURE_SPECS = [[], ["map", "gm_map"], ["P.1,2,3,7,1000"], ["iprec_at_recall.0,.05,.33,.5,.99,1"],
                 ["Rprec", "bpref", "recip_rank"], ["official", "P.4"]]


@pytest.mark.parametrize("seed", range(40))
def test_the_numpy_path_gives_pytrec_evals_doubles(seed):
    rng = random.Random(seed)
    data, qrels = _case(rng)
    table = scan_run(data)
    docs = table.docs(list(range(len(table.qids))))
    for specs in MEASURE_SPECS:
        requests = parse_measures(specs)
        for level in (1, 2, 3):
            for max_docs in (None, 1, 7):
                evaluated = sorted(q for q in table.qids if q in qrels)
                if not evaluated:
                    continue
                degenerate = {q for q in evaluated if max(qrels[q].values()) < 0}
                assert official_arrays.can_score(requests, level=level, judged_only=False, max_docs=max_docs,
                                                 degenerate=degenerate) == (not degenerate)
                if degenerate:
                    continue
                fast = official_arrays.score_table(qrels, table, evaluated, requests, level=level,
                                                   max_docs=max_docs)
                assert fast is not None
                slow = evaluate(qrels, docs, requests, level=level, max_docs=max_docs).per_query
                assert set(fast) == set(slow)
                for q in slow:
                    for name, value in slow[q].items():
                        assert fast[q][name] == value or (np.isnan(value) and np.isnan(fast[q][name])), \
                            (seed, specs, level, max_docs, q, name, fast[q][name], value)


def test_the_summary_lines_equal_pytrec_evals():
    rng = random.Random(99)
    data, qrels = _case(rng)
    table = scan_run(data)
    docs = table.docs(list(range(len(table.qids))))
    requests = parse_measures([])
    for complete in (False, True):
        fast = evaluate(qrels, table, requests, complete=complete)
        slow = evaluate(qrels, docs, requests, complete=complete)
        assert fast.summary == slow.summary


def test_what_the_numpy_path_leaves_to_pytrec_eval():
    requests = parse_measures([])
    plain = dict(level=1, judged_only=False, max_docs=None, degenerate=set())
    assert official_arrays.can_score(requests, **plain)
    assert not official_arrays.can_score(parse_measures(["ndcg"]), **plain)
    assert not official_arrays.can_score(parse_measures(["map", "relstring"]), **plain)
    assert not official_arrays.can_score(requests, **{**plain, "level": 0})
    assert not official_arrays.can_score(requests, **{**plain, "judged_only": True})
    assert not official_arrays.can_score(requests, **{**plain, "max_docs": 0})
    assert not official_arrays.can_score(requests, **{**plain, "degenerate": {"1"}})
    # a duplicate document, a docno past 64 bytes: None, and pytrec_eval's path decides
    qrels = {"1": {"a": 1}}
    dup = scan_run(b"1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n1 Q0 a 3 0.5 t\n")
    assert official_arrays.score_table(qrels, dup, ["1"], requests, level=1, max_docs=None) is None
    long = scan_run(b"1 Q0 " + b"x" * 65 + b" 1 2.0 t\n1 Q0 a 2 1.0 t\n")
    assert official_arrays.score_table(qrels, long, ["1"], requests, level=1, max_docs=None) is None
    # the same docno in two queries is no duplicate
    two = scan_run(b"1 Q0 a 1 2.0 t\n2 Q0 a 1 1.0 t\n")
    got = official_arrays.score_table({"1": {"a": 1}, "2": {"a": 0}}, two, ["1", "2"], requests, level=1,
                                      max_docs=None)
    assert got["1"]["num_rel_ret"] == 1.0 and got["2"]["num_rel_ret"] == 0.0


def _spans(tokens: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = (" ".join(tokens) + "\n").encode()
    starts, pos = [], 0
    for t in tokens:
        starts.append(pos)
        pos += len(t) + 1
    s = np.array(starts, dtype=np.int64)
    return np.frombuffer(data, dtype=np.uint8), s, s + np.array([len(t) for t in tokens], dtype=np.int64)


def test_decimals_read_what_float_reads():
    rng = random.Random(5)
    tokens = []
    for _ in range(30000):
        k = rng.random()
        if k < 0.3:
            tokens.append(str(rng.randint(-10**9, 10**9)))
        elif k < 0.6:
            tokens.append(f"{rng.uniform(-1000, 1000):.{rng.randint(0, 12)}f}")
        elif k < 0.8:
            tokens.append(rng.choice(["+", "-", ""]) + "".join(rng.choice("0123456789.") for _ in range(rng.randint(1, 18))))
        else:
            tokens.append(rng.choice(["1e3", "nan", "inf", "1_0", "+.5", "-.", ".", "5.", "-0", "+0.0", "00012.500",
                                      "1E-3", "0x10", "9" * 15, "9" * 16, "-" + "1" * 15 + ".", "1..2", "+-1"]))
    a, s, e = _spans(tokens)
    value, ok = decimals(a, WordView(a), s, e, dot=True)
    accepted = 0
    for t, v, good in zip(tokens, value.tolist(), ok.tolist()):
        plain = t.lstrip("+-").replace(".", "", 1)
        expect = (plain.isdigit() and len(t) - (t[0] in "+-") <= 16 and len(plain) <= 15 and t.count("+") + t.count("-") <= 1
                  and t[1:].lstrip("0123456789.") == "" and t[1:].count("-") + t[1:].count("+") == 0)
        assert good == expect, t
        if good:
            accepted += 1
            f = float(t)
            assert v == f and np.copysign(1.0, v) == np.copysign(1.0, f), t
    assert accepted > 20000
    ints, ok = decimals(a, WordView(a), s, e, dot=False)
    for t, v, good in zip(tokens, ints.tolist(), ok.tolist()):
        if good:
            assert "." not in t and int(t) == v


def test_words_order_as_the_bytes():
    rng = random.Random(3)
    tokens = list({"".join(rng.choice("ab09Z-_") for _ in range(rng.randint(1, 30))) for _ in range(3000)})
    a, s, e = _spans(tokens)
    w = words(WordView(a), s, e, 4)
    for t, row in zip(tokens, w):
        assert b"".join(int(x).to_bytes(8, "big") for x in row).rstrip(b"\0") == t.encode()
    by_words = sorted(range(len(tokens)), key=lambda i: tuple(w[i].tolist()))
    assert [tokens[i] for i in by_words] == sorted(tokens, key=str.encode)


def test_words_and_decimals_at_the_edges_of_the_buffer():
    # spans at the very start and end, read wider than themselves (a qrels' docnos can be longer)
    a = np.frombuffer(b"7 ab -1.5", dtype=np.uint8)
    s, e = np.array([0, 2, 5]), np.array([1, 4, 9])
    w = words(WordView(a), s, e, 8)
    assert [b"".join(int(x).to_bytes(8, "big") for x in row).rstrip(b"\0") for row in w] == [b"7", b"ab", b"-1.5"]
    value, ok = decimals(a, WordView(a), s, e, dot=True)
    assert ok.tolist() == [True, False, True] and value[[0, 2]].tolist() == [7.0, -1.5]
