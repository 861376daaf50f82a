#!/usr/bin/env python3
"""Benchmark: the labelling page (exam-verify label) on a DL19 sample, keyboard only.

Draws the sample the README's organizer path uses (the six first-stage runs, -k 10,
--seed 1) at 10 and 30 queries to count the labels each costs, then labels the 10-query
sample through chromium (playwright) pressing one key per pair and waiting for the next
pair to show: the page's own rate, a ceiling no assessor who reads the passage comes near, so
that a slow page would show. Needs ../shared/data/dl19 and chromium (make system-deps);
skips without them. Writes bench-out/label_page.json with the machine (common.machine).

The key to the next pair is timed in the page (performance.now() from the keydown to the
moment the next pair's counts are in the DOM) and, beside it, from this driver (key sent
to the pair seen, playwright's round trips included). Each round labels a fresh copy of
the sample twice, once with the server as it is and once with the server as it was before
issue 56's item 8 (TCP_NODELAY off, each response in two writes: headers, then body; a
monkeypatched copy started through --serve-as-before), in turn, so that the ratio of the
two comes from one run on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]
import common  # noqa: E402

DL19 = ROOT.parent / "shared" / "data" / "dl19"


def draw(folder: Path, n: int) -> int:
    runs = sorted(str(p) for p in (DL19 / "first-stage-runs").glob("*.run"))
    subprocess.run([sys.executable, "-m", "exam_eval.commands.verify", "label", str(folder), *runs, "-n", str(n),
                    "-k", "10", "--seed", "1", "--topics", str(DL19 / "topics.tsv"),
                    "--passages", str(DL19 / "passages.jsonl.gz"), "--no-serve"], check=True, capture_output=True, text=True)
    return json.loads((folder / "design.json").read_text())["n_pairs"]


# the keydown's time, and each key's time until the next pair's counts are written
KEY_TIMER = """() => {
  window.keyToPair = [];
  let t0 = null;
  document.addEventListener("keydown", () => { t0 = performance.now(); }, true);
  new MutationObserver(() => {
    if (t0 !== null) { window.keyToPair.push(performance.now() - t0); t0 = null; }
  }).observe(document.getElementById("overall-text"), { childList: true, characterData: true, subtree: true });
}"""


def serve_as_before(command: list[str]) -> None:
    """COMMAND (python -m exam_eval.commands.verify label ...) with the server as it was
    before issue 56's item 8: Nagle's algorithm on, headers and body in two writes."""
    import runpy

    from exam_eval.verify import label_server

    class TwoWrites:
        def __init__(self, wfile):
            self.wfile = wfile

        def write(self, data):
            head, sep, body = bytes(data).partition(b"\r\n\r\n")
            return self.wfile.write(head + sep) + (self.wfile.write(body) if body else 0)

        def __getattr__(self, name):
            return getattr(self.wfile, name)

    setup = label_server.Handler.setup

    def setup_two_writes(self):
        setup(self)
        self.wfile = TwoWrites(self.wfile)

    label_server.Handler.disable_nagle_algorithm = False
    label_server.Handler.setup = setup_two_writes
    assert command[1] == "-m", command
    sys.argv = [command[2], *command[3:]]
    runpy.run_module(command[2], run_name="__main__", alter_sys=True)


def label_all(browser, url: str, n: int) -> dict:
    """N keys on the page at URL, each after the last one's pair showed: the times (ms) in
    the page and from here, and the seconds in all."""
    page = browser.new_page()
    page.goto(url)
    page.wait_for_function("() => document.getElementById('overall-text').textContent !== ''")
    page.evaluate(KEY_TIMER)
    driver = []
    t0 = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        page.keyboard.press(str(i % 4))
        page.wait_for_function(f"() => document.getElementById('overall').value === {i + 1}")
        driver.append(1000 * (time.perf_counter() - t))
    seconds = time.perf_counter() - t0
    in_page = page.evaluate("() => window.keyToPair")
    page.close()
    assert len(in_page) == n, (len(in_page), n)
    return {"in_page": in_page, "driver": driver, "seconds": seconds}


def _stats(ms: list[float]) -> dict:
    ms = sorted(ms)
    return {"median": round(statistics.median(ms), 1), "p95": round(ms[int(len(ms) * 0.95)], 1),
            "min": round(ms[0], 1), "max": round(ms[-1], 1)}


def main() -> int:
    if sys.argv[1:2] == ["--serve-as-before"]:
        serve_as_before(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--rounds", type=int, default=3, help="Rounds, each labelling the sample with either server.")
    args = ap.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not DL19.is_dir() or exe is None:
        print("skipped: needs ../shared/data/dl19 and chromium (make system-deps)")
        return 0
    from label_serving import serving
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="bench-label-"))
    pairs = {n: draw(work / f"n{n}", n) for n in (10, 30)}
    arms = {"now": (), "before": (sys.executable, str(Path(__file__).resolve()), "--serve-as-before")}
    runs: dict[str, list[dict]] = {arm: [] for arm in arms}
    machine = common.machine()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        for r in range(args.rounds):
            for arm in list(arms)[r % 2:] + list(arms)[:r % 2]:   # which goes first alternates
                folder = work / f"{arm}-{r}"
                folder.mkdir()
                shutil.copy(work / "n10" / "design.json", folder / "design.json")
                with serving(str(folder), "--assessor", "bench", wrap=arms[arm]) as server:
                    runs[arm].append(label_all(browser, server.url, pairs[10]))
        browser.close()
    machine["load_average_after"] = list(os.getloadavg())
    result = {"machine": machine, "pairs_10_queries": pairs[10], "pairs_30_queries": pairs[30],
              "labels": pairs[10], "rounds": args.rounds}
    for arm, done in runs.items():
        seconds = sum(d["seconds"] for d in done)
        result[arm] = {"key_to_next_pair_ms": _stats([t for d in done for t in d["in_page"]]),
                       "key_to_next_pair_ms_driver": _stats([t for d in done for t in d["driver"]]),
                       "median_ms_by_round": [round(statistics.median(d["in_page"]), 1) for d in done],
                       "labels_per_minute": round(60 * pairs[10] * len(done) / seconds)}
    now, before = result["now"]["key_to_next_pair_ms"], result["before"]["key_to_next_pair_ms"]
    result["before_over_now_median"] = round(before["median"] / now["median"], 2)
    # the fields of the earlier runs, for the server as it is
    result.update({"seconds": round(sum(d["seconds"] for d in runs["now"]) / args.rounds, 2),
                   "labels_per_minute": result["now"]["labels_per_minute"],
                   "key_to_next_pair_ms_median": now["median"], "key_to_next_pair_ms_p95": now["p95"]})
    shutil.rmtree(work, ignore_errors=True)
    print(common.machine_line(result["machine"]))
    for k, v in result.items():
        if k != "machine":
            print(f"{k}\t{v}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "label_page.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
