"""exam-verify label's sample: the draw, the pool, the design, the log and what it exports."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from refusals import last_line_refusal, one_line_refusal

from exam_eval.verify.label_design import read_design
from exam_eval.verify.label_store import OneWriter, read_labels


def _corpus(d, n_queries=8, n_docs=12, seed=3):
    """Three runs over N queries (one query missing from one run), topics and passages."""
    rng = random.Random(seed)
    qids = [f"q{i}" for i in range(n_queries)]
    for r in range(3):
        lines = []
        for q in qids if r else qids[:-1]:
            for k in range(n_docs):
                lines.append(f"{q} Q0 {q}-d{rng.randrange(30)}-{k} {k} {rng.random() * 10:.4f} run{r}\n")
        (d / f"run{r}.run").write_text("".join(lines))
    (d / "topics.tsv").write_text("".join(f"{q}\twhat is {q}?\n" for q in qids))
    docs = {ln.split()[2] for r in range(3) for ln in (d / f"run{r}.run").read_text().splitlines()}
    (d / "passages.jsonl").write_text("".join(json.dumps({"doc_id": x, "text": f"text of {x}"}) + "\n"
                                              for x in sorted(docs)))
    return [str(d / f"run{r}.run") for r in range(3)]


def _top(path, q, k):
    """The run's top k of q: score descending, docno descending on ties (trec_eval's order)."""
    rows = [ln.split() for ln in open(path) if ln.split()[0] == q]
    rows.sort(key=lambda r: r[2], reverse=True)
    rows.sort(key=lambda r: -float(r[4]))   # stable: ties stay in docno-descending order
    return [r[2] for r in rows[:k]]


def _label(run_cli, folder, *args):
    return run_cli("exam-verify", "label", str(folder), *args)


def test_the_draw_is_seeded_uniform_and_extends_as_a_prefix(tmp_path, run_cli):
    runs = _corpus(tmp_path)
    folder = tmp_path / "s"
    res = _label(run_cli, folder, *runs, "-n", "3", "-k", "4", "--seed", "7", "--topics", str(tmp_path / "topics.tsv"),
                 "--passages", str(tmp_path / "passages.jsonl"), "--order", "pool", "--no-serve")
    assert res.returncode == 0, res.stderr
    d = read_design(str(folder))
    shared = sorted(f"q{i}" for i in range(7))   # q7 is missing from run0
    order = shared[:]
    random.Random(7).shuffle(order)
    assert d.queries == order[:3] and d.shared_queries == 7 and d.depth == 4 and d.seed == 7
    for q in d.queries:   # the pool: first appearance over the runs' top 4, runs in the order given
        want = list(dict.fromkeys(x for r in runs for x in _top(r, q, 4)))
        assert d.pairs[q] == want
    assert [r["path"] for r in d.runs] == runs and all(len(r["sha256"]) == 64 for r in d.runs)
    # a label given, then five more queries: the first three and their pairs stay as they were
    before = dict(d.pairs)
    res = _label(run_cli, folder, "-n", "5", "--no-serve")
    assert res.returncode == 0, res.stderr
    d2 = read_design(str(folder))
    assert d2.queries == order[:5] and all(d2.pairs[q] == before[q] for q in order[:3])
    assert "added 2 queries of the same draw" in res.stderr
    # other draws differ (the seed is used), and -n beyond the shared queries is refused
    res = _label(run_cli, tmp_path / "t", *runs, "-n", "3", "--topics", str(tmp_path / "topics.tsv"),
                 "--passages", str(tmp_path / "passages.jsonl"), "--no-serve")
    assert read_design(str(tmp_path / "t")).queries == (lambda o: (random.Random(0).shuffle(o), o)[1])(shared[:])[:3]
    line = one_line_refusal(_label(run_cli, folder, "-n", "8", "--no-serve"), "exam-verify", 1)
    assert "-n must be at most 7" in line
    line = one_line_refusal(_label(run_cli, folder, "-n", "2", "--no-serve"), "exam-verify", 1)
    assert "already has 5 queries" in line


def test_a_later_call_must_name_the_same_inputs(tmp_path, run_cli):
    runs = _corpus(tmp_path)
    folder = tmp_path / "s"
    common = ["--topics", str(tmp_path / "topics.tsv"), "--passages", str(tmp_path / "passages.jsonl")]
    assert _label(run_cli, folder, *runs, "-n", "2", *common, "--no-serve").returncode == 0
    design = (folder / "design.json").read_bytes()
    line = one_line_refusal(_label(run_cli, folder, "-k", "5", "--no-serve"), "exam-verify", 1)
    assert line.startswith("exam-verify: -k differs from the design") and "new FOLDER" in line
    line = one_line_refusal(_label(run_cli, folder, runs[0], "--no-serve"), "exam-verify", 1)
    assert "RUN differs" in line
    with open(runs[1], "a") as f:   # a run changed after the draw
        f.write("q0 Q0 late 99 99.0 run1\n")
    line = one_line_refusal(_label(run_cli, folder, "--no-serve"), "exam-verify", 2)
    assert "run1.run changed since the sample was drawn" in line
    assert (folder / "design.json").read_bytes() == design
    line = one_line_refusal(_label(run_cli, tmp_path / "new", *runs, "-n", "2", "--no-serve"), "exam-verify", 1)
    assert "needs RUN..., -n, --topics and --passages" in line
    assert not (tmp_path / "new").exists()


def test_passages_without_text_are_left_out_and_listed(tmp_path, run_cli):
    runs = _corpus(tmp_path)
    lines = (tmp_path / "passages.jsonl").read_text().splitlines()
    gone = {json.loads(ln)["doc_id"] for ln in lines[::4]}
    (tmp_path / "passages.jsonl").write_text("".join(ln + "\n" for i, ln in enumerate(lines) if i % 4))
    args = [*runs, "-n", "4", "--topics", str(tmp_path / "topics.tsv"), "--passages", str(tmp_path / "passages.jsonl")]
    res = _label(run_cli, tmp_path / "s", *args, "--no-serve")
    assert res.returncode == 0, res.stderr
    d = read_design(str(tmp_path / "s"))
    missing = {x for v in d.missing.values() for x in v}
    assert missing and missing <= gone and not missing & {x for v in d.pairs.values() for x in v}
    assert f"{len(missing)} pooled passages have no text" in res.stderr
    line = last_line_refusal(_label(run_cli, tmp_path / "e", *args, "--on-missing", "error", "--no-serve"),
                             "exam-verify", 2)
    assert "pooled passages have no text" in line and not (tmp_path / "e").exists()


def test_the_log_replays_labels_and_undos_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "labels" / "ann.jsonl"
    labels = read_labels(str(path))
    for doc, g in (("a", 1), ("b", 2), ("c", 0)):
        labels.append({"event": "label", "qid": "q", "docno": doc, "label": g, "note": ""})
    labels.append({"event": "undo", "qid": "q", "docno": "c"})
    labels.append({"event": "label", "qid": "q", "docno": "a", "label": 3, "note": "on second look"})
    with open(path, "ab") as f:
        f.write(b'{"event": "label", "qid": "q", "docno": "d", "la')   # a kill in the middle of a write
    notes = []
    again = read_labels(str(path), notes.append)
    assert again.given == {("q", "b"): (2, ""), ("q", "a"): (3, "on second look")}
    assert again.stack == [("q", "b"), ("q", "a")]
    assert len(notes) == 1 and "cut off" in notes[0]
    # an undo of a label that is not the newest is a broken log, named by line
    path.write_text('{"event": "label", "qid": "q", "docno": "a", "label": 1}\n'
                    '{"event": "label", "qid": "q", "docno": "b", "label": 1}\n'
                    '{"event": "undo", "qid": "q", "docno": "a"}\n')
    with pytest.raises(Exception, match=r"ann.jsonl:3: undo of q a"):
        read_labels(str(path))


def test_one_server_per_folder_and_the_lock_dies_with_its_process(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from exam_eval.verify.label_store import OneWriter\n"
                               f"w = OneWriter({str(tmp_path)!r}).__enter__(); w.say_holder('pid x, port 1')\n"
                               "print('held', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Exception, match=r"another labelling server writes this folder \(pid x, port 1\)"):
            OneWriter(str(tmp_path)).__enter__()
    finally:
        holder.kill()
        holder.wait()
    with OneWriter(str(tmp_path)):   # kill -9 released it
        pass
