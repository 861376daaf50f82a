#!/usr/bin/env python3
"""Benchmark: the labelling page (exam-verify label) on a DL19 sample, keyboard only.

Draws the sample the README's organizer path uses (the six first-stage runs, -k 10) at
10 and 30 queries to count the labels each costs, then labels the 10-query sample
through chromium (playwright) pressing one key per pair and waiting for the next pair to
show: the page's own rate, a ceiling no assessor who reads the passage comes near, so
that a slow page would show. Needs ../shared/data/dl19 and chromium (make system-deps);
skips without them. Writes bench-out/label_page.json with the machine (common.machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
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
                    "-k", "10", "--topics", str(DL19 / "topics.tsv"), "--passages", str(DL19 / "passages.jsonl.gz"),
                    "--no-serve"], check=True, capture_output=True, text=True)
    return json.loads((folder / "design.json").read_text())["n_pairs"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not DL19.is_dir() or exe is None:
        print("skipped: needs ../shared/data/dl19 and chromium (make system-deps)")
        return 0
    from label_serving import serving
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="bench-label-"))
    pairs = {n: draw(work / f"n{n}", n) for n in (10, 30)}
    with serving(str(work / "n10"), "--assessor", "bench") as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_function("() => document.getElementById('overall-text').textContent !== ''")
        waits = []
        t0 = time.perf_counter()
        for i in range(pairs[10]):
            t = time.perf_counter()
            page.keyboard.press(str(i % 4))
            page.wait_for_function(f"() => document.getElementById('overall').value === {i + 1}")
            waits.append(time.perf_counter() - t)
        total = time.perf_counter() - t0
        browser.close()
    waits.sort()
    result = {"machine": common.machine(), "pairs_10_queries": pairs[10], "pairs_30_queries": pairs[30],
              "labels": pairs[10], "seconds": round(total, 2), "labels_per_minute": round(60 * pairs[10] / total),
              "key_to_next_pair_ms_median": round(1000 * waits[len(waits) // 2], 1),
              "key_to_next_pair_ms_p95": round(1000 * waits[int(len(waits) * 0.95)], 1)}
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
