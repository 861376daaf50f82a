"""Hostile inputs to every reader, through the commands' real entry points (in process):
mutated real files (the demo data, outputs of our own commands, and ../shared/data when
present) must end in one clean line and exit 2 (1 for a usage error), or in a correct
result; never in a traceback (issue 21).

Mutations: truncation, byte flips, NUL bytes, a byte-order mark, CRLF line ends, invalid
UTF-8 on a known line, escaped lone surrogates, nesting 100,000 levels deep, a 3 MB line,
values of the wrong type, duplicated lines, an empty file, truncated and corrupted gzip.
Where the mutation does not change the content (BOM, CRLF), the output must equal the
unmutated input's; where it breaks a known line, the message must name that line.

Seeded (FUZZ_SEED, default 21) and bounded: a few hundred in-process runs, ~20 s.
The cases found by hand, reader by reader, are the other files of this folder.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from inproc import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
SHARED = ROOT.parent / "shared" / "data"
SEED = int(os.environ.get("FUZZ_SEED", "21"))
HEAD = 40  # lines kept of a shared-data file: small inputs keep every run fast

# reports in the three citation shapes, on demo topics, citing demo passages
REPORTS = [
    {"metadata": {"run_id": "rep-a", "topic_id": "101", "team_id": "t"},
     "responses": [{"text": "Bees make honey from nectar.", "citations": ["p064"]},
                   {"text": "They store it in combs.", "citations": []}], "references": ["p064"]},
    {"metadata": {"run_id": "rep-a", "topic_id": "102", "team_id": "t"},
     "responses": [{"text": "Debt and bread prices caused it.", "citations": [0]}], "references": ["p071"]},
    {"metadata": {"run_id": "rep-b", "topic_id": "101", "team_id": "u"},
     "responses": [{"text": "Honey is nectar, dried.", "citations": {"p092": 0.7}}], "references": ["p092"]},
]


def _head(src: Path, dst: Path, n: int = HEAD) -> Path:
    with gzip.open(src, "rt", encoding="utf-8") if src.suffix == ".gz" else open(src, encoding="utf-8") as fh:
        lines = [line for _, line in zip(range(n), fh)]
    dst.write_text("".join(lines), encoding="utf-8")
    return dst


def _ok(res, what: str) -> str:
    assert res.escaped is None, f"{what}: traceback\n{res.escaped}"
    assert res.code == 0, (what, res.code, res.stderr)
    return res.stdout


def _collection_slice(d: Path) -> list[tuple[str, Path, list]]:
    """Files of ../shared/data (their first lines), each with a command line that reads it
    together with companions cut to match (one DL19 query's run lines and judgments)."""
    s = d / "shared"
    s.mkdir()
    out = []
    runs = sorted((SHARED / "dl19" / "runs").iterdir())
    run = _head(runs[0], s / "dl19.run")
    qids = {line.split()[0] for line in run.read_text().splitlines()}
    with open(SHARED / "dl19" / "qrels.txt") as fh:
        qrels_lines = [line for line in fh if line.split()[0] in qids][:HEAD]
    qrels = s / "dl19.qrels"
    qrels.write_text("".join(qrels_lines))
    out += [("run", run, ["qrels", "-m", "map", qrels, None]), ("qrels", qrels, ["qrels", "-m", "map", None, run])]
    out.append(("grades", _head(SHARED / "dl19" / "graded-flan-t5-large.jsonl.gz", s / "wb-graded.jsonl", 3),
                ["qrels", None]))
    out.append(("bank", _head(SHARED / "dl19" / "banks" / "questions.jsonl.gz", s / "wb-bank.jsonl", 3),
                ["nuggets", "bank", "--to", "ours", None]))
    spot = SHARED / "autojudge-spot-check"
    queries = _head(spot / "queries.jsonl", s / "queries.jsonl")
    out.append(("reports", _head(spot / "runs" / "my_best_run_02_with_citations.jsonl", s / "spot.jsonl"),
                ["grade", "--dry-run", "--backend", "scripted", "--prompt", "umbrela", "--no-cache",
                 "--topics", queries, "--reports", None]))
    official = _head(SHARED / "dl19" / "official.tsv", s / "official.tsv")
    out.append(("leaderboard", official, ["correlate", "leaderboard", None, official]))
    tot = _head(spot / "trec-leaderboard.txt", s / "spot.tot")
    out.append(("leaderboard", tot, ["correlate", "leaderboard", "--truth-format", "tot", None, tot]))
    out.append(("topics", queries, ["nuggets", "bank", "--to", "nuggetizer", "--topics", None, d / "nuggets.jsonl"]))
    passages = _head(SHARED / "dl19" / "passages.jsonl.gz", s / "dl19-passages.jsonl")
    pooled = s / "pooled.qrels"  # the passages, judged for a demo query so the demo bank grades them
    pooled.write_text("".join(f"101 0 {json.loads(line)['doc_id']} 1\n" for line in passages.read_text().splitlines()))
    out.append(("passages", passages, ["grade", "--dry-run", "--backend", "scripted", "--prompt", "question-selfrating",
                                       "--no-cache", "--bank", d / "questions.jsonl", "--qrels", pooled,
                                       "--passages", None]))
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """(reader, valid file, command line reading it at the None) for every reader."""
    d = tmp_path_factory.mktemp("fuzz-base")
    f = {name: d / name for name in ("good.run", "poor.run", "random.run", "qrels.txt", "questions.jsonl",
                                     "nuggets.jsonl", "passages.jsonl", "topics.tsv")}
    for name, path in f.items():
        shutil.copy(DEMO / name, path)
    reports = d / "reports.jsonl"
    reports.write_text("".join(json.dumps(r) + "\n" for r in REPORTS))
    grades = d / "grades.jsonl"  # our own producer's output
    _ok(run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank", f["questions.jsonl"],
            "--passages", f["passages.jsonl"], "-k", "3", f["good.run"], f["poor.run"], "--no-cache",
            "-o", grades), "grading the demo")
    report_grades = d / "report-grades.jsonl"
    _ok(run("grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--bank", f["nuggets.jsonl"],
            "--reports", reports, "--no-cache", "-o", report_grades), "grading the reports")
    runs = [f["good.run"], f["poor.run"], f["random.run"]]
    leaderboard = d / "leaderboard.tsv"
    leaderboard.write_text(_ok(run("qrels", "-m", "map", "-m", "P.5", f["qrels.txt"], *runs), "leaderboard"))
    per_query = d / "runs.eval"  # trec_eval -q outputs of three runs, concatenated
    per_query.write_text("".join(_ok(run("qrels", "-q", "-m", "runid", "-m", "map", "-m", "P.5", f["qrels.txt"], r),
                                     "per query") for r in runs))
    topics_jsonl = d / "topics.jsonl"
    topics_jsonl.write_text("".join(json.dumps({"query_id": q, "text": t}) + "\n" for q, t in
                                    (line.split("\t", 1) for line in f["topics.tsv"].read_text().splitlines())))
    responses = d / "responses.jsonl"
    responses.write_text("".join(json.dumps({"query_id": q, "run_id": r, "text": t}) + "\n" for q, r, t in (
        ("101", "gen", "Bees collect nectar.\n\nThey dry it into honey."), ("102", "gen", "Bread prices rose."),
        ("101", "gen2", "Honey is made by bees."))))
    bank_to = ["nuggets", "bank", "--to", "nuggetizer", "--topics", None, f["nuggets.jsonl"]]
    dry = ["grade", "--dry-run", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache",
           "--bank", f["questions.jsonl"]]
    out = [
        ("run", f["good.run"], ["qrels", "-m", "map", "-m", "P.5", f["qrels.txt"], None]),
        ("run", f["good.run"], ["cover", grades, None]),
        ("qrels", f["qrels.txt"], ["qrels", "-m", "map", None, f["good.run"]]),
        ("grades", grades, ["qrels", None]),
        ("grades", grades, ["cover", None, f["good.run"]]),
        ("grades", grades, ["verify", "grading", None, "--bank", f["questions.jsonl"], "--top", "2"]),
        # the output exam-grade resumes: its grades are read before any work
        ("grades", grades, [*dry, "--passages", f["passages.jsonl"], "-k", "3", f["good.run"], f["poor.run"],
                            "-o", None]),
        ("qrels", f["qrels.txt"], ["correlate", "agreement", None, grades]),
        ("bank", f["questions.jsonl"], ["nuggets", "bank", "--to", "ours", None]),
        ("bank", f["questions.jsonl"], ["cover", "--bank", None, grades, f["good.run"]]),
        ("bank", f["nuggets.jsonl"], ["nuggets", "bank", "--to", "autojudge", None]),
        ("bank", f["questions.jsonl"], ["verify", "grading", grades, "--bank", None, "--top", "1"]),
        ("reports", reports, ["nuggets", "score", "--reports", None, "--bank", f["nuggets.jsonl"], report_grades]),
        ("leaderboard", leaderboard, ["correlate", "leaderboard", None, per_query]),
        ("leaderboard", per_query, ["correlate", "leaderboard", leaderboard, None]),
        ("topics", f["topics.tsv"], bank_to),
        ("topics", topics_jsonl, bank_to),
        ("topics", f["topics.tsv"], ["genq", "--dry-run", None]),
        ("passages", f["passages.jsonl"], [*dry, "--passages", None, f["good.run"]]),
        ("responses", responses, [*dry, "--responses", None]),
    ]
    if SHARED.is_dir():  # real collections' files, when the machine has them
        out += _collection_slice(d)
    return out


def _argv(template: list, path: Path) -> list:
    return [path if a is None else a for a in template]


# --------------------------------------------------------------------------- mutations
# each: (data, rng, is_json) -> (new bytes, expectation) or None when it does not apply;
# expectation: "any" (clean line or result), "same" (the unmutated output),
# ("line", n) (exit 2 naming line n), "fail" (exit 2)

def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _pick_line(lines: list[bytes], rng: random.Random) -> int:
    """0-based index of a non-blank line."""
    return rng.choice([i for i, line in enumerate(lines) if line.strip()])


def truncate(data, rng, is_json):
    return data[:rng.randrange(1, len(data))], "any"


def flip(data, rng, is_json):
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b), "any"


def nul(data, rng, is_json):
    i = rng.randrange(len(data))
    return data[:i] + b"\x00" + data[i:], "any"


def bom(data, rng, is_json):
    return b"\xef\xbb\xbf" + data, "same"


def crlf(data, rng, is_json):
    return data.replace(b"\n", b"\r\n"), "same"


def bad_utf8(data, rng, is_json):
    lines = _lines(data)
    i = _pick_line(lines, rng)
    cut = rng.randrange(len(lines[i]) + 1)
    lines[i] = lines[i][:cut] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]) + lines[i][cut:]
    return b"\n".join(lines), ("line", i + 1)


def surrogate(data, rng, is_json):
    if not is_json:
        return None
    lines = _lines(data)
    i = _pick_line(lines, rng)
    at = lines[i].find(b'": "')
    if at < 0:
        return None
    lines[i] = lines[i][:at + 4] + rng.choice([b"\\ud800", b"\\uDFFF", b"x\\udbff"]) + lines[i][at + 4:]
    return b"\n".join(lines), ("line", i + 1)


def deep(data, rng, is_json):
    lines = _lines(data)
    i = _pick_line(lines, rng)
    n = 100_000
    nest = rng.choice([b"[" * n + b"]" * n, b'{"a":' * n + b"1" + b"}" * n])
    if is_json:
        lines[i] = nest
        return b"\n".join(lines), ("line", i + 1)
    lines.insert(i, nest)
    return b"\n".join(lines), "any"


def huge_line(data, rng, is_json):
    lines = _lines(data)
    i = rng.randrange(len(lines))
    filler = b'{"query_id": "' + b"x" * 3_000_000 + b'"}' if is_json else b"y" * 3_000_000
    lines.insert(i, filler)
    return b"\n".join(lines), "any"


ODD_VALUES = [True, False, 1.5, -7, 10 ** 30, None, [], {}, "", " ", "a b", [True], {"x": None}, "\x00", 1e308]
ODD_TOKENS = ["nan", "inf", "-0", "1e999", "x", "1.5", "True", "0x10", "-1", "99999999999999999999999"]


def wrong_type(data, rng, is_json):
    lines = _lines(data)
    i = _pick_line(lines, rng)
    if is_json:
        try:
            obj = json.loads(lines[i])
        except ValueError:
            return None
        target = obj
        # one level down, at random: metadata, a sentence, a nugget
        while isinstance(target, (dict, list)) and target and rng.random() < 0.5:
            inner = list(target.values()) if isinstance(target, dict) else target
            nested = [v for v in inner if isinstance(v, (dict, list)) and v]
            if not nested:
                break
            target = rng.choice(nested)
        if isinstance(target, dict) and target:
            target[rng.choice(list(target))] = rng.choice(ODD_VALUES)
        elif isinstance(target, list) and target:
            target[rng.randrange(len(target))] = rng.choice(ODD_VALUES)
        else:
            return None
        lines[i] = json.dumps(obj).encode()
    else:
        fields = lines[i].decode("utf-8", "replace").split()
        fields[rng.randrange(len(fields))] = rng.choice(ODD_TOKENS)
        lines[i] = " ".join(fields).encode()
    return b"\n".join(lines), "any"


def duplicate(data, rng, is_json):
    lines = _lines(data)
    i = _pick_line(lines, rng)
    lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return b"\n".join(lines), "any"


def empty(data, rng, is_json):
    return rng.choice([b"", b"\n\n", b"   \n"]), "any"


def gz_truncated(data, rng, is_json):
    z = gzip.compress(data, mtime=0)
    return z[:rng.randrange(10, len(z) - 1)], "fail"


def gz_flipped(data, rng, is_json):
    z = bytearray(gzip.compress(data, mtime=0))
    i = rng.randrange(10, len(z) - 8)  # inside the deflate stream
    z[i] ^= 1 << rng.randrange(8)
    return bytes(z), "any"


MUTATIONS = [truncate, flip, nul, bom, crlf, bad_utf8, surrogate, deep, huge_line, wrong_type, duplicate, empty,
             gz_truncated, gz_flipped]
READERS = ["run", "qrels", "grades", "bank", "reports", "leaderboard", "topics", "passages", "responses"]


def _check(res, argv, path: Path, expect, baseline, base: Path) -> None:
    what = f"{' '.join(map(str, argv))} [{path.name}]"
    assert res.escaped is None, f"{what}: traceback\n{res.escaped}"
    assert res.code in (0, 1, 2), (what, res.code, res.stderr)
    prog = "exam-" + str(argv[0])
    if res.code != 0:
        line = res.last_line
        assert line.startswith(prog + ": "), (what, res.stderr)
        assert line.isprintable() and len(line) < 1000, (what, line[:300])
        assert "Traceback" not in res.stderr
    if expect == "same":
        assert (res.code, res.stdout.replace(str(path), str(base))) == baseline, (what, res.stderr)
    elif expect == "fail":
        assert res.code == 2, (what, res.code, res.stderr)
    elif isinstance(expect, tuple):
        assert res.code == 2 and f"{path}:{expect[1]}:" in res.last_line, (what, expect, res.stderr)


@pytest.mark.parametrize("reader", READERS)
def test_mutated_inputs_end_cleanly(reader, cases, tmp_path):
    rng = random.Random(f"{SEED}/{reader}")
    runs = 0
    for n, (what, base, template) in enumerate(cases):
        if what != reader:
            continue
        data = base.read_bytes()
        is_json = data.lstrip()[:1] in (b"{", b"[")
        res = run(*_argv(template, base))
        assert res.escaped is None and res.code == 0, (reader, template, res.stderr, res.escaped)
        baseline = (res.code, res.stdout)
        for mutate in MUTATIONS:
            for attempt in range(2):
                made = mutate(data, rng, is_json)
                if made is None:
                    continue
                new, expect = made
                if expect == "fail" and template[-2:] == ["-o", None]:
                    expect = "any"  # exam-grade's own output: a torn tail is repaired on resume
                suffix = ".gz" if mutate.__name__.startswith("gz_") else base.suffix
                path = tmp_path / f"{n}-{base.stem}.{mutate.__name__}{attempt}{suffix}"
                path.write_bytes(new)
                argv = _argv(template, path)
                _check(run(*argv), argv, path, expect, baseline, base)
                runs += 1
    assert runs >= 20
