"""The labelling page as an assessor would choose it (issue 56, items 9-13), in a real
browser (chromium, driven by keys): the topic's description and narrative and the track's
wording of each grade, query terms highlighted (a key toggles it), any earlier label of the
query revised (a list, a key back) as new events in the log, a "cannot judge" key kept apart
from the labels, and a query's pairs in a seeded shuffled order recorded in the design."""

from __future__ import annotations

import json

import pytest
from label_serving import serving
from refusals import one_line_refusal
from test_label_page import Page, _start, browser  # noqa: F401 (the fixture)
from test_label_sample import _corpus, _top

from exam_eval.verify.label_design import read_design
from exam_eval.verify.label_store import read_labels

DL_WORDING = ["Irrelevant", "Related", "Highly relevant", "Perfectly relevant"]


def _trec_topics(path, qids):
    path.write_text("".join(f"<top>\n<num> Number: {q}\n<title> what is {q}?\n<desc> Description:\nWhich passages "
                            f"define {q}.\n<narr> Narrative:\nA passage naming {q} without defining it is related "
                            "only.\n</top>\n\n" for q in qids))
    return path


def _wait_shown(tab, pair):
    tab.page.wait_for_function(f"() => document.getElementById('docno').textContent === {json.dumps(pair[1])}")


def test_the_topic_the_wording_and_highlighted_terms(browser, tmp_path):
    folder, args = _start(tmp_path)
    topics = _trec_topics(tmp_path / "topics.trec", [f"q{i}" for i in range(8)])
    args[args.index("--topics") + 1] = str(topics)
    with serving(*args, "--assessor", "ann") as server:
        pairs = read_design(str(folder)).pair_list()
        tab = Page(browser, server.url)
        q, d = pairs[0]
        assert tab.text("#description") == f"Description: Which passages define {q}."
        assert tab.text("#narrative") == f"Narrative: A passage naming {q} without defining it is related only."
        buttons = tab.page.eval_on_selector_all("#scale button", "bs => bs.map(b => [b.childNodes[1].textContent, "
                                                                 "b.querySelector('small').textContent])")
        assert [b[0] for b in buttons] == DL_WORDING
        assert buttons[3][1] == "The passage is dedicated to the query and contains the exact answer."
        # the query's term in the passage ("text of q0-d12-3"): marked, and h toggles it, also after a reload
        marks = lambda: tab.page.eval_on_selector_all("#passage mark", "ms => ms.map(m => m.textContent)")  # noqa
        assert marks() == [q] and tab.text("#passage") == f"text of {d}"
        tab.press("h")
        assert marks() == [] and tab.text("#passage") == f"text of {d}"
        tab.page.reload()
        tab.wait_done(0)
        assert marks() == []
        tab.press("h")
        assert marks() == [q]
        assert not tab.errors, tab.errors


def test_guidelines_from_a_file_replace_the_wording(browser, tmp_path, run_cli):
    folder, args = _start(tmp_path, n=1, k=2)
    guide = tmp_path / "guide.tsv"
    guide.write_text("# our track\n0\tOff topic\tNothing on the question.\n1\tOn topic\tSays something.\n"
                     "2\tAnswer\tHolds an answer.\n3\tFull answer\tHolds the whole answer.\n")
    with serving(*args, "--guidelines", str(guide), "--assessor", "ann") as server:
        tab = Page(browser, server.url)
        names = tab.page.eval_on_selector_all("#scale button", "bs => bs.map(b => b.childNodes[1].textContent)")
        assert names == ["Off topic", "On topic", "Answer", "Full answer"]
        server.stop()
    assert read_design(str(folder)).guidelines[2] == ["Answer", "Holds an answer."]
    bad = tmp_path / "bad.tsv"
    bad.write_text("0\tOff\n1\tOn\n5\tToo high\n")
    line = one_line_refusal(run_cli("exam-verify", "label", str(tmp_path / "t"), *args[1:], "--guidelines", str(bad),
                                    "--no-serve"), "exam-verify", 2)
    assert line == f"exam-verify: {bad}:3: label '5' is not one of the scale's 0-3", line
    assert not (tmp_path / "t").exists()


def test_an_earlier_label_of_the_query_is_revised_as_a_new_event(browser, tmp_path):
    folder, args = _start(tmp_path, n=1, k=6)
    with serving(*args, "--assessor", "ann") as server:
        pairs = read_design(str(folder)).pair_list()
        assert len(pairs) >= 4
        tab = Page(browser, server.url)
        for i, g in enumerate((1, 2, 3)):
            tab.press(str(g), i + 1)
        _wait_shown(tab, pairs[3])
        history = tab.page.eval_on_selector_all("#history li", "ls => ls.map(l => l.textContent)")
        assert history == [f"{pairs[0][1]}: 1", f"{pairs[1][1]}: 2", f"{pairs[2][1]}: 3"]
        tab.press("b")                               # back to the newest label before this pair
        _wait_shown(tab, pairs[2])
        assert tab.text("#given") == "Your label: 3 (Perfectly relevant). A label key changes it."
        tab.press("b")
        _wait_shown(tab, pairs[1])
        tab.press("0")                               # revised: then on to the first pair not yet labelled
        _wait_shown(tab, pairs[3])
        assert tab.done() == 3
        tab.page.click("#history li[data-at='0']")   # any label of the query, from the list
        _wait_shown(tab, pairs[0])
        tab.page.reload()                            # the server keeps where the assessor went
        tab.wait_done(3)
        assert tab.shown() == pairs[0] and tab.text("#given").startswith("Your label: 1 ")
        assert not tab.errors, tab.errors
    events = [json.loads(x) for x in (folder / "labels" / "ann.jsonl").read_text().splitlines()]
    assert [(e["event"], e["docno"], e.get("label")) for e in events] == [
        ("label", pairs[0][1], 1), ("label", pairs[1][1], 2), ("label", pairs[2][1], 3), ("label", pairs[1][1], 0)]
    assert read_labels(str(folder / "labels" / "ann.jsonl")).given == {
        pairs[0]: (1, ""), pairs[1]: (0, ""), pairs[2]: (3, "")}


def test_cannot_judge_is_kept_apart_from_the_labels(browser, tmp_path):
    folder, args = _start(tmp_path, n=1, k=2)
    with serving(*args, "--assessor", "ann") as server:
        pairs = read_design(str(folder)).pair_list()
        tab = Page(browser, server.url)
        tab.press("n")
        tab.page.keyboard.type("the passage is cut off")
        tab.press("Enter")
        tab.press("x", 1)                            # done, with no label
        assert tab.shown() == pairs[1]
        tab.press("u", 0)                            # undo takes it back like a label
        assert tab.shown() == pairs[0]
        tab.press("x", 1)
        for i in range(1, len(pairs)):
            tab.press("2", i + 1)
        tab.page.wait_for_function("() => !document.getElementById('finished').hidden")
        code, err = server.stop()
    assert code == 0, err
    qrels = (folder / "qrels" / "ann.qrels").read_text().splitlines()
    assert len(qrels) == len(pairs) - 1 and not any(f" {pairs[0][1]} " in x for x in qrels)   # not a 0
    notes = (folder / "qrels" / "ann.notes.tsv").read_text().splitlines()
    assert f"{pairs[0][0]}\t{pairs[0][1]}\tcannot_judge\t" in "\n".join(notes) + "\n"
    assert (folder / "qrels" / "ann.labelled.txt").read_text() == pairs[0][0] + "\n"   # the query is done
    assert f"ann: {len(pairs) - 1} labels" in err


def test_a_querys_pairs_are_shuffled_by_the_seed_and_the_page_follows_the_design(browser, tmp_path, run_cli):
    runs = _corpus(tmp_path)
    common = [*runs, "-n", "4", "-k", "5", "--seed", "3", "--topics", str(tmp_path / "topics.tsv"),
              "--passages", str(tmp_path / "passages.jsonl"), "--no-serve"]
    assert run_cli("exam-verify", "label", str(tmp_path / "a"), *common).returncode == 0
    assert run_cli("exam-verify", "label", str(tmp_path / "b"), *common).returncode == 0
    assert run_cli("exam-verify", "label", str(tmp_path / "p"), *common, "--order", "pool").returncode == 0
    a, b, p = (read_design(str(tmp_path / x)) for x in "abp")
    raw = json.loads((tmp_path / "a" / "design.json").read_text())
    assert raw["order"] == "shuffled" and json.loads((tmp_path / "p" / "design.json").read_text())["order"] == "pool"
    assert a.pairs == b.pairs   # seeded: the same on every run
    for q in a.queries:
        pool = list(dict.fromkeys(x for r in runs for x in _top(r, q, 5)))
        assert p.pairs[q] == pool and sorted(a.pairs[q]) == sorted(pool)
    assert sum(a.pairs[q] != p.pairs[q] for q in a.queries) >= 3
    # the best-ranked passage (first pooled) does not always come first
    assert sum(a.pairs[q][0] == p.pairs[q][0] for q in a.queries) < len(a.queries)
    line = one_line_refusal(run_cli("exam-verify", "label", str(tmp_path / "a"), "--order", "pool", "--no-serve"),
                            "exam-verify", 1)
    assert "--order pool differs from the design" in line
    with serving(str(tmp_path / "a"), "--assessor", "ann") as server:
        tab = Page(browser, server.url)
        shown = []
        for i in range(3):
            shown.append(tab.shown())
            tab.press("1", i + 1)
        assert shown == a.pair_list()[:3]


@pytest.mark.parametrize("field, value, says", [
    ("order", "random", 'field "order" is "random", not one of shuffled, pool'),
    ("guidelines", [["x", "y"]], 'field "guidelines" is'),
])
def test_the_new_design_fields_are_checked(tmp_path, run_cli, field, value, says):
    folder, args = _start(tmp_path, n=1, k=2)
    assert run_cli("exam-verify", "label", *args, "--no-serve").returncode == 0
    design = json.loads((folder / "design.json").read_text())
    design[field] = value
    (folder / "design.json").write_text(json.dumps(design))
    line = one_line_refusal(run_cli("exam-verify", "label", str(folder), "--no-serve"), "exam-verify", 2)
    assert says in line, line
