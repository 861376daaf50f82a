"""Engine logic with the scripted back end: dedup, cache, shards, torn-output repair,
segmentation, pooling order, truncation. Expected values come from direct recounts."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from exam_eval.backends.base import scored_result
from exam_eval.grading.types import GradeRequest
from exam_eval.backends.scripted import ScriptedBackend
from exam_eval.grading import engine
from exam_eval.grading.cache import GradeCache, NullCache
from exam_eval.grading.output import GradesAppender, existing_keys, repair
from exam_eval.grading.pool import Pool
from exam_eval.grading.prompts import get_prompt
from exam_eval.grading.segment import approx_tokens, read_responses, segment_response, segments_to_runs
from exam_eval.errors import InputError, UsageError
from exam_eval.io.bank_items import make_item_id, BankItem
from exam_eval.grading.grade_files import read_grades
from exam_eval.io.grades import Grade, grade_line
from exam_eval.trec_eval.trec_files import ranked

PROMPT = get_prompt("question-selfrating")


def _item(qid, text, answers=None):
    return BankItem(qid, make_item_id(qid, text), "question", text, answers=answers)


def _world(n_queries=3, n_docs=5, n_items=4, dup_text=True):
    docs, texts, items = {}, {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        docs[qid] = [f"d{q}-{d}" for d in range(n_docs)]
        for d in range(n_docs):
            texts[f"d{q}-{d}"] = f"passage {d} of query {q} " + "word " * (d * 3)
        items[qid] = [_item(qid, f"question {i} about {q}?") for i in range(n_items)]
    if dup_text:  # the same passage text under two ids: one model call
        texts["d0-1"] = texts["d0-0"]
    return docs, texts, items


def _run(tmp_path, backend, docs, texts, items, cache=None, out_name="g.jsonl", shard=None):
    out = tmp_path / out_name
    units, npairs = engine.build_units(docs=docs, texts=texts, items=items, queries={}, prompt=PROMPT,
                                       identity=backend.cache_identity, shard=shard)
    repair(str(out))
    plan = engine.plan_work(units, npairs, existing_keys(str(out)), cache or NullCache(), backend.model_id, PROMPT)
    app = GradesAppender(str(out))
    stats = engine.execute(plan, backend, PROMPT, app, cache)
    app.close()
    return out, stats


def _lines(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [json.loads(x) for x in data.decode().splitlines()]


def test_dedup_grades_identical_texts_once(tmp_path):
    docs, texts, items = _world()
    b = ScriptedBackend()
    out, stats = _run(tmp_path, b, docs, texts, items)
    pairs = sum(len(docs[q]) * len(items[q]) for q in docs)
    distinct = len({(i.text, texts[d]) for q in docs for d in docs[q] for i in items[q]})
    assert stats.pairs == pairs == len(_lines(out))
    assert stats.graded == distinct == pairs - 4  # d0-1 shares d0-0's text for 4 items
    assert stats.deduplicated == 4
    assert len(b.seen) == distinct
    rows = {(r["doc_id"], r["item_id"]): r["grade"] for r in _lines(out)}
    for it in items["q0"]:
        assert rows[("d0-0", it.item_id)] == rows[("d0-1", it.item_id)]


def test_cache_second_run_grades_nothing(tmp_path):
    docs, texts, items = _world()
    cache = GradeCache(tmp_path / "c.sqlite")
    out1, s1 = _run(tmp_path, ScriptedBackend(), docs, texts, items, cache, "a.jsonl")
    b2 = ScriptedBackend()
    out2, s2 = _run(tmp_path, b2, docs, texts, items, cache, "b.jsonl")
    assert s2.graded == 0 and b2.calls == 0
    assert s2.from_cache == s1.pairs
    key = lambda r: (r["query_id"], r["doc_id"], r["item_id"])  # noqa: E731
    assert sorted(_lines(out1), key=key) == sorted(_lines(out2), key=key)


def test_cache_is_keyed_by_texts_not_ids(tmp_path):
    docs, texts, items = _world(n_queries=1)
    cache = GradeCache(tmp_path / "c.sqlite")
    _run(tmp_path, ScriptedBackend(), docs, texts, items, cache, "a.jsonl")
    edited = {"q0": items["q0"][:-1] + [_item("q0", "a brand new question?")]}
    out, s = _run(tmp_path, ScriptedBackend(), docs, texts, edited, cache, "b.jsonl")
    distinct_docs = len({texts[d] for d in docs["q0"]})
    assert s.graded == distinct_docs
    assert s.from_cache == 3 * len(docs["q0"])


def test_shards_partition_the_work(tmp_path):
    docs, texts, items = _world(n_queries=4, n_docs=6)
    full, sf = _run(tmp_path, ScriptedBackend(), docs, texts, items, out_name="full.jsonl")
    keys = []
    graded = 0
    for i in (1, 2, 3):
        out, s = _run(tmp_path, ScriptedBackend(), docs, texts, items, out_name=f"s{i}.jsonl", shard=(i, 3))
        keys += [(r["query_id"], r["doc_id"], r["item_id"], r["grade"]) for r in _lines(out)] if out.exists() else []
        graded += s.graded
    assert len(keys) == len(set(keys))  # disjoint
    assert sorted(keys) == sorted((r["query_id"], r["doc_id"], r["item_id"], r["grade"]) for r in _lines(full))
    assert graded == sf.graded  # identical texts never land in two shards


def test_parse_shard():
    assert engine.parse_shard("2/5") == (2, 5)
    for bad in ("0/3", "4/3", "x", "1/0", "1/2/3"):
        with pytest.raises(UsageError):
            engine.parse_shard(bad)


def test_failed_calls_are_neither_written_nor_cached(tmp_path):
    docs, texts, items = _world(n_queries=1, dup_text=False)
    fail_text = items["q0"][0].text
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"item": fail_text, "fail": True}) + "\n")
    cache = GradeCache(tmp_path / "c.sqlite")
    out, s = _run(tmp_path, ScriptedBackend(script=str(script)), docs, texts, items, cache)
    assert s.failed == len(docs["q0"])
    assert all(r["item_id"] != items["q0"][0].item_id for r in _lines(out))
    # a rerun with a working model grades exactly the failed pairs
    out, s2 = _run(tmp_path, ScriptedBackend(), docs, texts, items, cache)
    assert s2.graded == len(docs["q0"]) and s2.in_output == s.graded


def test_unparseable_output_is_recorded_not_graded(tmp_path):
    docs, texts, items = _world(n_queries=1, dup_text=False)
    out, s = _run(tmp_path, ScriptedBackend(script=lambda req, text: "I cannot tell you that"), docs, texts, items)
    rows = _lines(out)
    assert rows and all(r["parse_ok"] is False and r["grade"] is None for r in rows)
    assert s.unparsed == len(rows)
    assert all(r["answer"] == "I cannot tell you that" for r in rows)


def test_unparseable_output_is_not_cached(tmp_path):
    """An unparsed answer is recorded, but a rerun (a new output) asks the model again."""
    docs, texts, items = _world(n_queries=1, dup_text=False)
    cache = GradeCache(tmp_path / "c.sqlite")
    _, s = _run(tmp_path, ScriptedBackend(script=lambda req, text: "I cannot tell you that"), docs, texts, items,
                cache, out_name="first.jsonl")
    assert s.unparsed == s.pairs and s.graded == s.pairs
    out, s2 = _run(tmp_path, ScriptedBackend(), docs, texts, items, cache, out_name="second.jsonl")
    assert s2.from_cache == 0 and s2.graded == s.graded and s2.unparsed == 0
    assert all(r["parse_ok"] for r in _lines(out))


def test_scored_result_normalises_and_takes_argmax():
    res = scored_result(PROMPT, PROMPT.labels, {"0": 1.0, "3": 6.0, "5": 3.0})
    assert res.grade == 3 and res.parse_ok
    assert res.probs == pytest.approx({"0": 0.1, "1": 0.0, "2": 0.0, "3": 0.6, "4": 0.0, "5": 0.3})
    assert scored_result(PROMPT, PROMPT.labels, None).parse_ok is False
    assert scored_result(PROMPT, PROMPT.labels, {"0": 0.0}).parse_ok is False


def test_scored_result_follows_its_rule_on_any_weights():
    """Against the rule written out plainly (normalise the non-negative weights over the
    labels, take the most probable, the first of equals): random weights with zeros, ties,
    negatives, missing labels, ints, numpy floats and non-finite values, with and without
    the prompt's label table given, and a prompt whose labels are words."""
    import math

    import numpy as np

    def rule(labels, weights, table, low):
        if weights is None:
            return "failed"
        vals = [float(weights.get(lab, 0.0)) for lab in labels]
        if not weights or any(math.isnan(v) or math.isinf(v) for v in vals):
            return None
        pos = [max(v, 0.0) for v in vals]
        if not sum(pos) > 0 or math.isinf(sum(pos)):
            return None
        probs = [v / sum(pos) for v in pos]
        best = min(j for j in range(len(labels)) if probs[j] == max(probs))
        return labels[best], table.get(labels[best], low + best), dict(zip(labels, probs))

    rng = random.Random(7)
    choices = [0.0, 0.0, 1.0, 2.0, -1.0, 0.5, 3, 1e-300, 1e300, 1e308, float("nan"), float("inf"), -float("inf")]
    prompts = [PROMPT, get_prompt("sun")]
    for n in range(3000):
        prompt = prompts[n % 2]
        labels = prompt.labels
        table = prompt.label_grades()
        weights = {lab: rng.choice(choices) if rng.random() < 0.3 else rng.random() * rng.choice([1, 1e-3, 1e6])
                   for lab in labels if rng.random() < 0.8}
        if n % 7 == 0:
            with np.errstate(over="ignore"):  # 1e300 as float32 is inf: one more non-finite case
                weights = {k: np.float32(v) for k, v in weights.items()}
        want = rule(labels, weights, table, prompt.scale[0])
        for given in (None, table):
            got = scored_result(prompt, labels, weights, given)
            if want is None:
                assert not got.parse_ok and got.grade is None, (weights, got)
            else:
                assert got.parse_ok and (got.answer, got.grade) == want[:2], (weights, got)
                assert got.probs == pytest.approx(want[2], rel=1e-12, abs=0), weights
    assert scored_result(PROMPT, PROMPT.labels, None).failed


def test_unit_keys_equal_unit_key_byte_for_byte():
    """The planner's key maker against the cache's reference function: the same key for
    any texts (quotes, backslashes, control and line-separator characters, non-Latin
    scripts, emoji, empty and missing parts, answer keys or none), so caches written
    before it still answer."""
    from exam_eval.grading.cache import UnitKeys, unit_key

    rng = random.Random(3)
    alphabet = ['a', 'Z', ' ', '"', "\\", "\n", "\t", "\x00", "\x1f", "\u2028", "\u00e9", "\u4e2d", "\U0001f600", "/", "<"]

    def text():
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))

    for identity, phash in (("hf-seq2seq:m", "abc"), (text(), text()), ("", "")):
        make = UnitKeys(identity, phash)
        passages = [text() for _ in range(5)]
        for _ in range(400):
            query = rng.choice([None, text(), "q"])
            item = rng.choice([None, text()])
            keys = rng.choice([None, (), (text(),), (text(), text()), ["x", "y"]])
            passage = rng.choice(passages)
            assert make(query, item, passage, keys) == unit_key(identity, phash, query, item, passage, keys)


def test_scoring_mode_through_the_engine(tmp_path):
    docs, texts, items = _world(n_queries=1, dup_text=False)
    b = ScriptedBackend(score=True, script=lambda req, text: {"1": 1.0, "4": 3.0})
    out, _ = _run(tmp_path, b, docs, texts, items)
    for r in _lines(out):
        assert r["grade"] == 4 and r["probs"]["4"] == pytest.approx(0.75) and r["probs"]["1"] == pytest.approx(0.25)


def test_truncation_cuts_only_the_passage():
    b = ScriptedBackend(window=120)
    question = "what exactly do honey bees collect from flowers on long summer days?"
    passage = " ".join(f"w{i}" for i in range(500))
    b.grade([GradeRequest(PROMPT, "q", question, passage)])
    rendered = b.seen[-1]
    assert question in rendered  # the question stays whole
    assert len(rendered.split()) <= 120
    kept = rendered.split("Context: ", 1)[1].split()
    assert kept == passage.split()[: len(kept)] and 0 < len(kept) < 500
    # the instructions are all there
    assert rendered.startswith(PROMPT.render(query="", item=question, context="").rsplit("Context:", 1)[0])


def _grade_lines(n: int) -> list[str]:
    """Lines as exam-grade writes them (repair cuts only after lines that are grades)."""
    return [grade_line(Grade(query_id="q", doc_id=f"d{i}", item_id=f"q/i{i}", kind="question", grade=i % 6,
                             probs=None, answer=str(i % 6), parse_ok=True, model="m", prompt="question-selfrating"))
            for i in range(n)]


def test_repair_cuts_a_torn_line(tmp_path):
    a, b, c = _grade_lines(3)
    p = tmp_path / "g.jsonl"
    p.write_text(a + b + c[:20])
    assert repair(str(p)) == 20
    assert p.read_text() == a + b
    assert repair(str(p)) == 0


def test_repair_cuts_a_torn_gzip_member(tmp_path):
    a, b = _grade_lines(2)
    p = tmp_path / "g.jsonl.gz"
    one, two = gzip.compress(a.encode()), gzip.compress(b.encode())
    p.write_bytes(one + two[: len(two) // 2])
    assert repair(str(p)) == len(two) // 2
    assert gzip.decompress(p.read_bytes()) == a.encode()


@pytest.mark.parametrize("content, line", [
    ("101 0 p001 1\n110 0 p033 0", 2),  # a qrels file given as -o, its last newline missing
    ("important notes, no newline", 1),
    ('{"query_id": "101", "item_id": "101/x", "kind": "question", "text": "t"}', 1),  # a one-line bank
    ('{"query_id": "101", "text": "t"}\n{"query_id": "102", "te', 1),  # a bank, torn
])
def test_repair_refuses_to_cut_what_is_not_a_torn_batch_of_grades(tmp_path, content, line):
    """Only a grade line cut short, after lines that are all grades, is a killed writer's
    tail; any other file given as -o was cut by a line (or emptied) before the refusal."""
    p = tmp_path / "notes.txt"
    p.write_text(content)
    for read in (lambda: repair(str(p)), lambda: existing_keys(str(p), read_only=True)):
        with pytest.raises(InputError) as err:
            read()
        assert (err.value.path, err.value.line) == (str(p), line)
        assert p.read_text() == content


def test_repair_cuts_a_whole_grade_line_without_its_newline_and_zeros_after_a_line(tmp_path):
    a, b = _grade_lines(2)
    p = tmp_path / "g.jsonl"
    for tail in (b.rstrip("\n"), "\0" * 16, b[:30] + "\0" * 8):
        p.write_text(a + tail)
        assert repair(str(p)) == len(tail.encode())
        assert p.read_text() == a


def test_gzip_output_appends_members_readable_by_read_grades(tmp_path):
    docs, texts, items = _world(n_queries=2, dup_text=False)
    out, s = _run(tmp_path, ScriptedBackend(batch_size=3), docs, texts, items, out_name="g.jsonl.gz")
    grades = read_grades(str(out))
    assert len(grades) == s.pairs
    # a second run appends nothing, the file stays readable
    _, s2 = _run(tmp_path, ScriptedBackend(), docs, texts, items, out_name="g.jsonl.gz")
    assert s2.in_output == s.pairs and s2.graded == 0


def test_pool_depth_follows_trec_eval_order(tmp_path):
    rng = random.Random(7)
    lines = []
    for q in ("1", "2"):
        for d in range(30):
            lines.append(f"{q} Q0 doc{d:02d} {d} {rng.choice([1.0, 2.0, 3.0, 2.5])} tag")
    run = tmp_path / "r.run"
    run.write_text("\n".join(lines) + "\n")
    pool = Pool()
    pool.add_run(str(run), 5)
    for q in ("1", "2"):
        scored = [(float(line.split()[4]), line.split()[2]) for line in lines if line.split()[0] == q]
        expected = [d for _, d in sorted(scored, key=lambda x: (-x[0], [-ord(c) for c in x[1]]))][:5]
        assert list(pool.docs[q]) == expected
        assert ranked({d: s for s, d in scored})[:5] == expected


def test_segmentation(tmp_path):
    text = "# Heading\n\nFirst paragraph, long enough to stand alone as a passage here.\n\n" + \
        " ".join(f"Sentence {i} says something." for i in range(300))
    segs = segment_response("q1", "runA", text)
    assert all(approx_tokens(s.text) <= 400 for s in segs)
    assert segs[0].text.startswith("# Heading First paragraph")  # a heading joins its paragraph
    assert " ".join(s.text for s in segs).split() == " ".join(text.split()).split()  # nothing lost
    assert [s.doc_id for s in segs] == [s.doc_id for s in segment_response("q1", "runA", text)]  # stable
    assert len({s.doc_id for s in segs}) == len(segs)
    changed = segment_response("q1", "runA", text.replace("Sentence 299", "Sentence X"))
    assert changed[0].doc_id == segs[0].doc_id and changed[-1].doc_id != segs[-1].doc_id
    f = tmp_path / "resp.jsonl"
    f.write_text(json.dumps({"query_id": "q1", "run_id": "runA", "text": text}) + "\n")
    runs = segments_to_runs(read_responses(str(f)))
    assert ranked(runs["runA"]["q1"]) == [s.doc_id for s in segs]


@pytest.mark.parametrize("text, most_chars", [
    ("这是一个关于蜜蜂如何酿造蜂蜜的句子。" * 400, 420),       # Chinese sentences: full stops, no spaces
    ("ภาษาไทยเขียนติดกันโดยไม่มีช่องว่าง" * 500, 420),         # Thai: no sentence marks, no spaces
    ("See https://example.com/" + "a/" * 3000 + " for details.", 1000),  # one word of 6,000 characters
])
def test_text_without_spaces_or_sentence_ends_is_cut_too(text, most_chars):
    """Such a text was one segment (1,200 to 3,200 tokens of its kind): the model window
    then cut it, and most of the answer was never graded."""
    segs = segment_response("q", "r", text)
    assert len(segs) > 3 and max(len(s.text) for s in segs) <= most_chars, [len(s.text) for s in segs]
    assert "".join("".join(s.text.split()) for s in segs) == "".join(text.split())  # nothing lost
    assert min(len(s.text.split()) for s in segs) >= 1 and not any(s.text == "See" for s in segs)


@pytest.mark.parametrize("brk", ["\r\r", "\r", "\u2029", "\u2028\u2028"])
def test_paragraph_breaks_other_than_lf(brk):
    a, b = "First paragraph is a full sentence of plain text.", "Second paragraph is another full sentence of text."
    assert [s.text for s in segment_response("q", "r", a + brk + b)] == [a, b]


def test_single_newline_responses_split_into_lines():
    segs = segment_response("q", "r", "Line one is a full sentence of plain text.\nLine two is another full sentence of text.")
    assert [s.text for s in segs] == ["Line one is a full sentence of plain text.", "Line two is another full sentence of text."]


def test_non_finite_scores_are_recorded_as_unparsed_not_dropped(tmp_path):
    docs, texts, items = _world(n_queries=1, dup_text=False)
    b = ScriptedBackend(score=True, script=lambda req, text: {"1": float("nan"), "4": 1.0})
    out, s = _run(tmp_path, b, docs, texts, items)
    rows = _lines(out)
    assert s.failed == 0 and len(rows) == s.pairs and all(not r["parse_ok"] and r["grade"] is None for r in rows)


def test_dry_run_reads_past_a_torn_tail_without_cutting_it(tmp_path):
    docs, texts, items = _world(n_queries=1, dup_text=False)
    out, s = _run(tmp_path, ScriptedBackend(), docs, texts, items)
    with open(out, "a") as fh:
        fh.write('{"query_id": "q0", "doc')
    size = out.stat().st_size
    assert len(existing_keys(str(out), read_only=True)) == s.pairs
    assert out.stat().st_size == size
