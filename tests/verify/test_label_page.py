"""The labelling page in a real browser: chromium (make system-deps) driven by playwright
through keys, undo, skip, a note, a reload, two assessors, and a kill -9 of the server
between two labels; and a DL19 sample labelled with NIST's own labels, whose intervals
must be those of NIST's qrels cut to the same pairs."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from urllib.parse import urlsplit

import pytest

import chromium
from child_env import ChildEnv
from label_serving import serving
from test_label_sample import _corpus

from exam_eval.verify.label_design import read_design
from exam_eval.verify.label_store import read_labels

CHROMIUM_ARGS = chromium.FLAGS
_chromium = chromium.chromium


@pytest.fixture
def browser(tmp_path):
    exe = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Page:
    """One tab on the page; every request it makes is recorded (none may leave 127.0.0.1)."""

    def __init__(self, browser, url):
        self.page = browser.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        self.wait_done(None)

    def text(self, sel: str) -> str:
        return self.page.locator(sel).inner_text()

    def done(self) -> int:
        return int(self.page.eval_on_selector("#overall", "e => e.value"))

    def wait_done(self, n: int | None) -> None:
        """Until the page shows N labels done (None: until its first state arrived)."""
        if n is None:
            self.page.wait_for_function("() => document.getElementById('overall-text').textContent !== ''")
        else:
            self.page.wait_for_function(f"() => document.getElementById('overall').value === {n}")

    def press(self, key: str, then_done: int | None = None) -> None:
        self.page.keyboard.press(key)
        if then_done is not None:
            self.wait_done(then_done)

    def shown(self) -> tuple[str, str]:
        return self.text("#qid"), self.text("#docno")


def _start(tmp_path, n=3, k=3, extra=()):
    runs = _corpus(tmp_path)
    folder = tmp_path / "s"
    args = [str(folder), *runs, "-n", str(n), "-k", str(k), "--topics", str(tmp_path / "topics.tsv"),
            "--passages", str(tmp_path / "passages.jsonl"), *extra]
    return folder, args


def test_keys_undo_skip_note_reload_and_a_kill_between_labels(browser, tmp_path):
    folder, args = _start(tmp_path)
    with serving(*args, "--assessor", "ann") as server:
        design = read_design(str(folder))
        pairs = design.pair_list()
        tab = Page(browser, server.url)
        assert tab.shown() == pairs[0]
        q0 = pairs[0][0]
        assert tab.text("#query") == f"what is {q0}?" and tab.text("#passage") == f"text of {pairs[0][1]}"
        assert tab.page.locator("#llm").is_hidden()   # blind by default
        assert tab.page.locator("#scale button").count() == 4
        assert tab.text("#overall-text") == f"0 done / {len(pairs)} left"
        tab.press("2", 1)
        assert tab.shown() == pairs[1]
        tab.press("n")
        tab.page.keyboard.type("unsure: 3 or 1?")   # digits typed into the note are not labels
        assert tab.done() == 1
        tab.press("Enter")
        tab.press("1", 2)
        tab.press("u", 1)                           # the note's label taken back: that pair again
        assert tab.shown() == pairs[1]
        tab.press("s")                              # skipped: the next pair, pair 1 stays unlabelled
        tab.page.wait_for_function(f"() => document.getElementById('docno').textContent === {json.dumps(pairs[2][1])}")
        tab.press("3", 2)
        assert tab.shown() == pairs[3]
        n_q0 = len(design.pairs[q0])
        tab.page.reload()
        tab.wait_done(2)
        assert tab.shown() == pairs[3]              # the reload shows where the assessor is
        bar = tab.page.eval_on_selector("#query-bar", "e => [e.value, e.max]")
        current = pairs[3][0]
        assert bar == [sum(p in {pairs[0], pairs[2]} for p in pairs if p[0] == current),
                       len(design.pairs[current])]
        done_q0 = sum(p in {pairs[0], pairs[2]} for p in pairs if p[0] == q0)
        cells = tab.page.eval_on_selector_all("#per-query tbody tr:first-child td", "tds => tds.map(t => t.textContent)")
        assert cells == [q0, str(done_q0), str(n_q0 - done_q0)]
        # a second assessor at once: their own file, from the first pair
        bob = Page(browser, server.base + "a/bob/")
        assert bob.shown() == pairs[0]
        bob.press("0", 1)
        assert tab.done() == 2
        port = urlsplit(server.url).port
        assert all(urlsplit(u).hostname == "127.0.0.1" and urlsplit(u).port == port
                   for u in tab.requests + bob.requests), tab.requests + bob.requests
        assert not tab.errors and not bob.errors, tab.errors + bob.errors
        code, _ = server.stop(signal.SIGKILL)       # kill -9 between two labels
        assert code == -signal.SIGKILL
    log = read_labels(str(folder / "labels" / "ann.jsonl"))
    assert log.given == {pairs[0]: (2, ""), pairs[2]: (3, "")}
    lines = [json.loads(x) for x in (folder / "labels" / "ann.jsonl").read_text().splitlines()]
    assert [(x["event"], x.get("note")) for x in lines] == [("label", ""), ("label", "unsure: 3 or 1?"),
                                                             ("undo", None), ("label", "")]
    assert read_labels(str(folder / "labels" / "bob.jsonl")).given == {pairs[0]: (0, "")}
    # the restart (a new token) resumes at the first unlabelled pair: the one skipped
    with serving(str(folder), "--assessor", "ann") as server:
        tab = Page(browser, server.url)
        tab.wait_done(2)
        assert tab.shown() == pairs[1]
        tab.press("1", 3)
        code, err = server.stop()
        assert code == 0, err
    assert (folder / "qrels" / "ann.qrels").read_text() == "".join(
        f"{q} 0 {d} {g}\n" for (q, d), g in sorted({pairs[0]: 2, pairs[1]: 1, pairs[2]: 3}.items()))
    assert "ann: 3 labels" in err and "bob: 1 labels" in err


def test_the_last_pair_undo_and_the_llm_label_shown_on_request(browser, tmp_path):
    folder, args = _start(tmp_path, n=1, k=2)
    qrels = tmp_path / "llm.qrels"
    runs = [a for a in args if a.endswith(".run")]
    qrels.write_text("".join(f"{q} 0 {d} 1\n" for q, _, d, *_ in (ln.split() for ln in open(runs[1]))))
    with serving(*args, "--llm", str(qrels), "--show-llm", "--scale", "0-1", "--assessor", "ann") as server:
        pairs = read_design(str(folder)).pair_list()
        llm = {(q, d) for q, _, d, *_ in (ln.split() for ln in open(runs[1]))}
        tab = Page(browser, server.url)
        assert tab.page.locator("#scale button").count() == 2
        for i, p in enumerate(pairs):
            assert tab.shown() == p
            assert tab.text("#llm") == f"LLM label: {1 if p in llm else 'none'}"
            tab.press("3")                          # beyond the scale: no label
            tab.press("1", i + 1)
        assert tab.page.locator("#finished").is_visible()
        tab.press("u", len(pairs) - 1)
        assert tab.shown() == pairs[-1]
    assert read_labels(str(folder / "labels" / "ann.jsonl")).given == {p: (1, "") for p in pairs[:-1]}


def _unmarked(dom: str) -> str:
    """The DOM with the query terms' highlighting taken out: the passage's text as sent."""
    return re.sub(r"</?mark>", "", dom)


def test_dump_dom_shows_the_first_pair_and_names_no_other_host(tmp_path):
    exe = _chromium()
    folder, args = _start(tmp_path)
    with serving(*args) as server:
        pairs = read_design(str(folder)).pair_list()
        r = subprocess.run([exe, "--headless", *CHROMIUM_ARGS, f"--user-data-dir={tmp_path / 'profile'}",
                            "--virtual-time-budget=10000", "--dump-dom", server.base + "a/ann/"],
                           capture_output=True, text=True, timeout=120, env=ChildEnv())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert f'<p id="query" class="query">what is {pairs[0][0]}?</p>' in dom
    assert f"text of <mark>{pairs[0][0]}</mark>-" in dom   # the query's term highlighted by default
    assert f"text of {pairs[0][1]}" in _unmarked(dom)
    _no_other_host(dom, urlsplit(server.url).port)


def test_dl19_printed_url_renders_the_first_pair_in_dump_dom(shared_data, tmp_path):
    exe = _chromium()
    dl = shared_data / "dl19"
    runs = sorted(str(p) for p in (dl / "first-stage-runs").glob("*.run"))
    folder = tmp_path / "dl19"
    with serving(str(folder), *runs, "-n", "10", "-k", "10", "--topics", str(dl / "topics.tsv"),
                 "--passages", str(dl / "passages.jsonl.gz"), "--assessor", "ann") as server:
        design = json.loads((folder / "design.json").read_text())
        assert design["n_queries"] == 10 and design["depth"] == 10 and len(design["runs"]) == 6
        assert all(len(r["sha256"]) == 64 for r in design["runs"]) and design["seed"] == 0
        qid, docno = design["queries"][0], design["pairs"][design["queries"][0]][0]
        r = subprocess.run([exe, "--headless", *CHROMIUM_ARGS, f"--user-data-dir={tmp_path / 'profile'}",
                            "--virtual-time-budget=10000", "--dump-dom", server.url],
                           capture_output=True, text=True, timeout=120, env=ChildEnv())
    assert r.returncode == 0, r.stderr[-2000:]
    query = next(ln.split("\t")[1] for ln in (dl / "topics.tsv").read_text().splitlines() if ln.split("\t")[0] == qid)
    import gzip
    from html import escape

    with gzip.open(dl / "passages.jsonl.gz", "rt") as f:
        text = next(o["text"] for o in map(json.loads, f) if o["doc_id"] == docno)
    assert f'<p id="query" class="query">{escape(query, quote=False)}</p>' in r.stdout
    assert f'<div id="passage" class="passage">{escape(text, quote=False)}</div>' in _unmarked(r.stdout)
    _no_other_host(r.stdout, urlsplit(server.url).port)


def _no_other_host(dom: str, port: int) -> None:
    import re

    urls = re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", dom)
    assert all(urlsplit(u).hostname in (None, "127.0.0.1") and urlsplit(u).port in (None, port) for u in urls), urls
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!/)""", dom)   # every load is a path on this server


def test_dl19_sample_typed_with_nist_labels_gives_nist_intervals(browser, shared_data, tmp_path, run_cli):
    """10 DL19 queries, the top 10 of the six first-stage runs, labelled through the page by
    an assessor who types NIST's label of each pair shown: the qrels out are NIST's cut to
    the sampled pairs, and the intervals from them are those from that cut, byte for byte."""
    dl = shared_data / "dl19"
    runs = sorted(str(p) for p in (dl / "first-stage-runs").glob("*.run"))
    llm = str(dl / "llm-qrels" / "QuestionSelfRatedUnanswerablePromptWithChoices.qrels")
    nist: dict[str, dict[str, int]] = {}
    for line in (dl / "qrels.txt").read_text().splitlines():
        q, _, d, g = line.split()
        nist.setdefault(q, {})[d] = int(g)
    folder = tmp_path / "dl19-sample"
    with serving(str(folder), *runs, "-n", "10", "-k", "10", "--topics", str(dl / "topics.tsv"),
                 "--passages", str(dl / "passages.jsonl.gz"), "--llm", llm, "--assessor", "nist") as server:
        design = read_design(str(folder))
        pairs = design.pair_list()
        assert len(design.queries) == 10 and design.shared_queries == 43 and len(pairs) == 208
        tab = Page(browser, server.url)
        for i, (q, d) in enumerate(pairs):
            assert tab.shown() == (q, d)
            tab.press(str(nist[q][d]), i + 1)
        assert tab.page.locator("#finished").is_visible()
        assert not tab.errors, tab.errors
        code, err = server.stop()
        assert code == 0, err
    assert "nist: 208 labels; 10 labelled queries" in err
    typed = folder / "qrels" / "nist.qrels"
    labelled = folder / "qrels" / "nist.labelled.txt"
    assert labelled.read_text().split() == design.queries
    cut = tmp_path / "nist-cut.qrels"
    cut.write_text("".join(f"{q} 0 {d} {nist[q][d]}\n" for q, d in sorted(pairs)))
    common = ["-m", "ndcg@10", "--labelled", str(labelled), "--samples", "1000", "--seed", "3"]
    from_page = run_cli("exam-correlate", "interval", str(typed), llm, *runs, *common)
    from_nist = run_cli("exam-correlate", "interval", str(cut), llm, *runs, *common)
    assert from_page.returncode == 0, from_page.stderr
    assert from_page.stdout == from_nist.stdout and len(from_page.stdout.splitlines()) == 1 + 6 * 4
    assert sorted(typed.read_text().splitlines()) == sorted(cut.read_text().splitlines())
