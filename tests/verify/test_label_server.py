"""The labelling server over HTTP: its token, its host, its headers, one writer per folder,
a label on disk before its answer; and where the labels go (exam-qrels --human,
exam-correlate agreement between two assessors)."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from child_env import ChildEnv
from label_serving import serving
from refusals import one_line_refusal
from test_label_page import _start

from exam_eval.verify.label_design import read_design
from exam_eval.verify.label_store import read_labels


def _raw(url: str, method="GET", body: bytes | None = None, headers=None):
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request(method, u.path + (f"?{u.query}" if u.query else ""), body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, dict(r.getheaders()), r.read()


def test_token_host_and_headers(tmp_path):
    _, args = _start(tmp_path)
    with serving(*args) as server:
        status, headers, body = _raw(server.url)
        assert status == 200 and b"who is labelling?" in body
        assert "default-src 'none'" in headers["Content-Security-Policy"] and headers["Cache-Control"] == "no-store"
        assert headers["Referrer-Policy"] == "no-referrer"
        u = urlsplit(server.url)
        token = u.path.strip("/")
        assert len(token) >= 24
        wrong = server.url.replace(token, token[:-1] + ("A" if token[-1] != "A" else "B"))
        assert _raw(wrong + "api/ann/state")[0] == 404
        assert _raw(f"http://127.0.0.1:{u.port}/")[0] == 404
        status, _, _ = _raw(server.base + "api/ann/state", headers={"Host": f"attacker.example:{u.port}"})
        assert status == 421                         # a DNS-rebound name gets nothing
        status, _, _ = _raw(server.base + "api/ann/label", "POST", b"at=0&label=1",
                            {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 415                         # another site's form cannot post a label
        status, _, body = _raw(server.base + "api/ann/label", "POST", b'{"at": 0, "label": 4}',
                               {"Content-Type": "application/json"})
        assert status == 400 and b"0-3" in body
        status, headers, _ = _raw(server.base + "go?assessor=ann")
        assert status == 303 and headers["Location"] == f"/{token}/a/ann/"
        assert _raw(server.base + "go?assessor=../x")[0] == 400
        state = server.api("ann", "state")
        assert "llm" not in state["pair"]           # blind: the grade is not even sent
    assert not (tmp_path / "s" / "labels").exists()


def test_a_label_is_on_disk_before_its_answer_and_a_stale_page_is_told(tmp_path):
    folder, args = _start(tmp_path)
    with serving(*args) as server:
        pairs = read_design(str(folder)).pair_list()
        after = server.api("ann", "label", {"at": 0, "label": 3, "note": "clear"})
        assert after["done"] == 1 and after["pair"]["at"] == 1 and after["stale"] is False
        # the answer came: the line is in the file already, whatever happens to the server now
        assert read_labels(str(folder / "labels" / "ann.jsonl")).given == {pairs[0]: (3, "clear")}
        again = server.api("ann", "label", {"at": 0, "label": 1})   # a second tab still at pair 0
        assert again["stale"] is True and again["done"] == 1 and again["pair"]["at"] == 1
        server.api("ann", "label", {"at": 1, "label": 0})
        code, _ = server.stop(signal.SIGKILL)
        assert code == -signal.SIGKILL
    assert read_labels(str(folder / "labels" / "ann.jsonl")).given == {pairs[0]: (3, "clear"), pairs[1]: (0, "")}
    # the notes out beside the qrels: a line per noted label, nothing for the others
    res = subprocess.run([sys.executable, "-m", "exam_eval.commands.verify", "label-qrels", str(folder)],
                         capture_output=True, text=True, env=ChildEnv(), timeout=120)
    assert res.returncode == 0, res.stderr
    assert (folder / "qrels" / "ann.notes.tsv").read_text() == f"qid\tdocno\tlabel\tnote\n{pairs[0][0]}\t{pairs[0][1]}\t3\tclear\n"


def test_a_second_server_on_the_folder_is_refused(tmp_path):
    folder, args = _start(tmp_path)
    with serving(*args) as server:
        res = subprocess.run([sys.executable, "-m", "exam_eval.commands.verify", "label", str(folder)],
                             capture_output=True, text=True, env=ChildEnv(), timeout=120)
        line = one_line_refusal(res, "exam-verify", 2)
        assert "another labelling server writes this folder" in line and f"port {urlsplit(server.url).port}" in line
        assert server.api("ann", "state")["total"] == len(read_design(str(folder)).pair_list())


def test_show_llm_needs_the_designs_llm_labels(tmp_path, run_cli):
    folder, args = _start(tmp_path)
    assert run_cli("exam-verify", "label", *args, "--no-serve").returncode == 0
    line = one_line_refusal(run_cli("exam-verify", "label", str(folder), "--show-llm"), "exam-verify", 1)
    assert "the design names no LLM labels" in line


def _qrels(text: str) -> dict:
    out: dict = {}
    for ln in text.splitlines():
        q, _, d, g = ln.split()
        out.setdefault(q, {})[d] = int(g)
    return out


def test_human_labels_replace_the_llms_and_two_assessors_agree_as_sklearn_says(tmp_path, run_cli):
    from sklearn.metrics import cohen_kappa_score

    folder, args = _start(tmp_path, n=4, k=4)
    with serving(*args) as server:
        pairs = read_design(str(folder)).pair_list()
        for i in range(len(pairs)):
            server.api("ann", "label", {"at": i, "label": (i * 7) % 4})
            server.api("bob", "label", {"at": i, "label": (i * 7 + (i % 3 == 0)) % 4})
    res = run_cli("exam-verify", "label-qrels", str(folder))
    assert res.returncode == 0, res.stderr
    ann = _qrels((folder / "qrels" / "ann.qrels").read_text())
    bob = _qrels((folder / "qrels" / "bob.qrels").read_text())
    assert [ann[q][d] for q, d in pairs] == [(i * 7) % 4 for i in range(len(pairs))]
    # LLM labels on every other sampled pair and on pairs outside the sample
    llm_pairs = [(q, d) for q, d in pairs][::2]
    text = "".join(f"{q} 0 {d} 1\n" for q, d in llm_pairs) + "zz 0 other 2\n"
    (tmp_path / "llm.qrels").write_text(text)
    res = run_cli("exam-qrels", str(tmp_path / "llm.qrels"), "--human", str(folder / "qrels" / "ann.qrels"))
    assert res.returncode == 0, res.stderr
    merged = _qrels(res.stdout)
    assert merged["zz"] == {"other": 2} and all(merged[q][d] == ann[q][d] for q, d in pairs)
    changed = sum(ann[q][d] != 1 for q, d in llm_pairs)
    assert (f"{len(pairs)} human labels; {len(llm_pairs)} replaced the LLM's label on their pair ({changed} of "
            f"them a different label), {len(pairs) - len(llm_pairs)} on pairs the LLM did not label") in res.stderr
    res = run_cli("exam-correlate", "agreement", str(folder / "qrels" / "ann.qrels"), str(folder / "qrels" / "bob.qrels"),
                  "--human-min", "2", "--llm-min", "2")
    assert res.returncode == 0, res.stderr
    a = [ann[q][d] for q, d in pairs]
    b = [bob[q][d] for q, d in pairs]
    want = cohen_kappa_score([x >= 2 for x in a], [x >= 2 for x in b])
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("kappa\t"))
    assert float(line.split("\t")[1]) == pytest.approx(want, abs=5e-5)


def test_a_broken_label_log_is_refused_before_serving(tmp_path, run_cli):
    folder, args = _start(tmp_path)
    assert run_cli("exam-verify", "label", *args, "--no-serve").returncode == 0
    (folder / "labels").mkdir()
    q, d = read_design(str(folder)).pair_list()[0]   # line 1 a label of the design's, line 2 broken
    (folder / "labels" / "ann.jsonl").write_text(json.dumps({"event": "label", "qid": q, "docno": d, "label": 1})
                                                + '\n{"event": "relabel"}\n')
    res = subprocess.run([sys.executable, "-m", "exam_eval.commands.verify", "label", str(folder)],
                         capture_output=True, text=True, env=ChildEnv(), timeout=120)
    line = one_line_refusal(res, "exam-verify", 2)
    assert "ann.jsonl:2:" in line and "not a label event" in line and not res.stdout
    (folder / "design.json").write_text("{")
    line = one_line_refusal(run_cli("exam-verify", "label", str(folder), "--no-serve"), "exam-verify", 2)
    assert "design.json" in line and "not a label design" in line
