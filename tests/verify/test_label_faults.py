"""Human labels survive every fault (issue 56, items 1-3 and 5-7): a torn tail is cut
before the next label is appended (its bytes kept beside), a label is acknowledged only
with every byte on disk (a full disk answers 507 and leaves the log whole), every event
read names a pair of the design and a label of its scale, nugget mode reads --topics before
it writes the folder, -n waits for no server, and the page's requests that a page could not
have sent are a 4xx that writes nothing."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.error
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from child_env import ChildEnv
from label_serving import serving
from refusals import one_line_refusal
from test_label_page import _start
from test_label_nuggets import _rag
from tests.io.test_output_failures import small_tmpfs

from exam_eval.verify.label_design import read_design
from exam_eval.verify.label_store import read_labels

# a server that never answers (the old code on a full disk) fails the test, not the suite
pytestmark = pytest.mark.timeout(120)


def _folder(tmp_path, run_cli, n=2, k=2):
    folder, args = _start(tmp_path, n=n, k=k)
    res = run_cli("exam-verify", "label", *args, "--no-serve")
    assert res.returncode == 0, res.stderr
    return folder, args, read_design(str(folder)).pair_list()


def _event(q, d, label, note=""):
    return json.dumps({"event": "label", "qid": q, "docno": d, "label": label, "note": note, "time": 1.0}) + "\n"


def _qrels(run_cli, folder):
    return run_cli("exam-verify", "label-qrels", str(folder))


# ---- 1. a torn tail is cut, its bytes kept beside, before the next label

def test_a_label_after_a_torn_tail_lands_on_a_whole_line(tmp_path, run_cli):
    folder, args, pairs = _folder(tmp_path, run_cli)
    log = folder / "labels" / "ann.jsonl"
    log.parent.mkdir()
    torn = b'{"event": "label", "qid": "' + pairs[1][0].encode() + b'", "do'   # a kill in the middle of a write
    log.write_bytes(_event(*pairs[0], 2).encode() + torn)
    with serving(str(folder)) as server:
        state = server.api("ann", "state")
        assert state["done"] == 1
        state = server.api("ann", "label", {"at": state["pair"]["at"], "label": 3})
        assert state["done"] == 2 and not state["stale"]
        code, err = server.stop()
    assert code == 0, err
    assert "its torn last line (" in err and "was cut before this label was appended" in err, err
    side = folder / "labels" / "ann.jsonl.torn-1"
    assert side.read_bytes() == torn   # kept, for a person to read
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(x)["event"] == "label" for x in lines[:-1]) and len(lines) == 3
    res = _qrels(run_cli, folder)   # the next reader takes the log whole
    assert res.returncode == 0, res.stderr
    assert read_labels(str(log)).given == {pairs[0]: (2, ""), pairs[1]: (3, "")}
    assert sorted(os.listdir(folder / "labels")) == ["ann.jsonl", "ann.jsonl.torn-1"]  # not an assessor


# ---- 2. acknowledged only when every byte is on disk

def _fill(folder: Path) -> Path:
    """Fill the disk under FOLDER to its last byte."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 16, 4096, 256, 16, 1):
            try:
                while os.write(fd, b"x" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def _post(server, assessor: str, action: str, body: dict) -> tuple[int, str]:
    try:
        return 200, json.dumps(server.api(assessor, action, body))
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_full_disk_is_never_acknowledged_and_leaves_the_log_whole(tmp_path, run_cli):
    with small_tmpfs(tmp_path / "small", "64k") as small:
        folder, args = _start(tmp_path, n=2, k=2)
        args[0] = str(small / "s")
        res = run_cli("exam-verify", "label", *args, "--no-serve")
        assert res.returncode == 0, res.stderr
        folder = small / "s"
        pairs = read_design(str(folder)).pair_list()
        log = folder / "labels" / "ann.jsonl"
        log.parent.mkdir()
        # the log's page filled to 40 bytes short of its end: the next line (about 100 bytes)
        # fits only in part, as in the report (40 of ~105 bytes on disk)
        first = _event(*pairs[0], 1)
        pad = 4096 - 40 - len(first) - len(_event(*pairs[1], 1, ""))
        log.write_text(first + _event(*pairs[1], 1, "n" * pad))
        assert log.stat().st_size == 4096 - 40
        with serving(str(folder)) as server:
            filler = _fill(small)
            at = server.api("ann", "state")["pair"]["at"]
            code, said = _post(server, "ann", "label", {"at": at, "label": 2})
            assert code == 507 and "the label was not kept: No space left on device" in said, (code, said)
            assert log.stat().st_size == 4096 - 40   # the fragment taken back
            filler.unlink()
            code, said = _post(server, "ann", "label", {"at": at, "label": 2})   # room again: kept
            assert code == 200 and json.loads(said)["done"] == 3, said
        labels = read_labels(str(log))
        assert labels.whole is None and labels.given[pairs[2]] == (2, "")


def test_a_full_disk_at_server_start_names_the_file(tmp_path, run_cli):
    with small_tmpfs(tmp_path / "small", "64k") as small:
        folder, args = _start(tmp_path, n=2, k=2)
        args[0] = str(small / "s")
        assert run_cli("exam-verify", "label", *args, "--no-serve").returncode == 0
        _fill(small)
        res = subprocess.run([sys.executable, "-m", "exam_eval.commands.verify", "label", str(small / "s")],
                             capture_output=True, text=True, env=ChildEnv(), timeout=120)
        line = one_line_refusal(res, "exam-verify", 2)
        assert line == (f"exam-verify: {small / 's' / '.server.lock'}: cannot write: No space left on device "
                        "(no label could be kept)"), line
        assert res.stdout == ""   # no URL of a page that could keep nothing


# ---- 3. every event read names a pair of the design and a label of its scale

@pytest.mark.parametrize("line, says", [
    (lambda p: _event("q-not-drawn", "d-nowhere", 1), "the pair q-not-drawn 'd-nowhere' is not one of the design's"),
    (lambda p: _event(*p[0], 9), "label 9 is not an integer 0-3 (the design's scale)"),
    (lambda p: _event(*p[0], True), "label true is not an integer 0-3"),
    (lambda p: _event(*p[0], None), "label null is not an integer 0-3"),
    (lambda p: _event(*p[0], 1).replace('"label": 1', '"label": 1e400'), "label inf is not an integer 0-3"),
    (lambda p: _event(*p[0], 1).replace('"label": 1', '"label": 2.0'), "label 2.0 is not an integer 0-3"),
    (lambda p: json.dumps({"event": "label", "qid": 1, "docno": p[0][1], "label": 1}) + "\n",
     "qid 1 and docno"),
], ids=["foreign pair", "label 9", "label true", "label null", "label 1e400", "label 2.0", "qid a number"])
def test_an_event_off_the_design_is_one_line_naming_file_and_line(tmp_path, run_cli, line, says):
    folder, args, pairs = _folder(tmp_path, run_cli)
    log = folder / "labels" / "ann.jsonl"
    log.parent.mkdir()
    log.write_text(_event(*pairs[1], 0) + line(pairs))
    before = log.read_bytes()
    for res in (_qrels(run_cli, folder),
                subprocess.run([sys.executable, "-m", "exam_eval.commands.verify", "label", str(folder)],
                               capture_output=True, text=True, env=ChildEnv(), timeout=120)):
        said = one_line_refusal(res, "exam-verify", 2)
        assert said.startswith(f"exam-verify: {log}:2: not a label event: ") and says in said, said
    assert log.read_bytes() == before and not (folder / "qrels").exists()


# ---- 5. nugget mode reads --topics before the folder is written

def test_nugget_mode_checks_its_topics_before_writing_the_folder(tmp_path, run_cli):
    _rag(tmp_path)
    bad = tmp_path / "topics.json"
    bad.write_text('{"not": "topics"}\n')
    folder = tmp_path / "s"
    common = ["--reports", str(tmp_path / "runs"), "--bank", str(tmp_path / "bank.jsonl"), "-n", "2", "--no-serve"]
    res = run_cli("exam-verify", "label", str(folder), *common, "--topics", str(bad))
    said = one_line_refusal(res, "exam-verify", 2)
    assert str(bad) in said, said
    assert not folder.exists()
    res = run_cli("exam-verify", "label", str(folder), *common, "--topics", str(tmp_path / "topics.tsv"))
    assert res.returncode == 0, res.stderr   # the corrected --topics is taken
    assert read_design(str(folder)).topics == str(tmp_path / "topics.tsv")


# ---- 6. -n never changes a folder a server holds

def test_extending_a_folder_a_server_holds_is_refused_before_any_change(tmp_path, run_cli):
    folder, args, _ = _folder(tmp_path, run_cli, n=2)
    design = (folder / "design.json").read_bytes()
    with serving(str(folder)):
        res = run_cli("exam-verify", "label", str(folder), "-n", "4", "--no-serve")
        said = one_line_refusal(res, "exam-verify", 2)
        assert "another labelling server writes this folder (pid " in said, said
        assert (folder / "design.json").read_bytes() == design
    res = run_cli("exam-verify", "label", str(folder), "-n", "4", "--no-serve")   # stopped: extended
    assert res.returncode == 0, res.stderr
    assert len(read_design(str(folder)).queries) == 4


# ---- 7. what a page could not have sent: a 4xx, nothing written

def _raw(server, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, bytes]:
    u = urlsplit(server.base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request(method, u.path + path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_requests_no_page_sends_are_refused_and_write_nothing(tmp_path, run_cli):
    folder, args, pairs = _folder(tmp_path, run_cli)
    with serving(str(folder)) as server:
        at = server.api("ann", "state")["pair"]["at"]
        cases = [
            ("GET", "go?assessor=ann.jsonl", b"", 400),
            ("GET", "go?assessor=..%2Fx", b"", 400),
            ("GET", "a/ann.jsonl/", b"", 404),
            ("GET", "api/ann.jsonl/state", b"", 404),
            ("POST", "api/ann.jsonl/label", json.dumps({"at": at, "label": 1}).encode(), 404),
            ("POST", "api/ann/label", b'{"at": 1e400, "label": 1}', 400),
            ("POST", "api/ann/label", json.dumps({"at": at, "label": True}).encode(), 400),
            ("POST", "api/ann/label", json.dumps({"at": len(pairs) + 5, "label": 1}).encode(), 400),
            ("POST", "api/ann/label", json.dumps({"at": -1, "label": 1}).encode(), 400),
            ("POST", "api/ann/skip", json.dumps({"at": "0"}).encode(), 400),
            ("POST", "api/ann/label", json.dumps({"at": at, "label": 1, "note": {"x": 1}}).encode(), 400),
        ]
        for method, path, body, want in cases:
            status, said = _raw(server, method, path, body)
            assert status == want, (method, path, body, status, said)
        status, said = _raw(server, "POST", "api/ann/label", b"{}", {"Content-Length": "-5"})
        assert status == 400 and b"negative Content-Length" in said, said
        assert server.api("ann", "state")["done"] == 0   # the server still answers, and kept nothing
        code, err = server.stop(signal.SIGTERM)
    assert code == 0 and "Traceback" not in err, err
    assert not (folder / "labels" / "ann.jsonl").exists() and not (folder / "labels" / "ann.jsonl.jsonl").exists()


def test_label_qrels_of_a_folder_carried_away_from_its_runs_still_exports(tmp_path, run_cli):
    """design.json's queries and pairs are checked against its runs where they are; a
    label folder copied to another machine (the runs not there) still gives its qrels."""
    folder, args, pairs = _folder(tmp_path, run_cli)
    (folder / "labels").mkdir()
    (folder / "labels" / "ann.jsonl").write_text("".join(_event(q, d, 1) for q, d in pairs))
    for run in tmp_path.glob("run*.run"):
        run.rename(run.with_suffix(".moved"))
    res = _qrels(run_cli, folder)
    assert res.returncode == 0, res.stderr
    assert f"{tmp_path / 'run0.run'} and 2 more files named in the design are not here: its queries and pairs are " \
           "not checked against them" in res.stderr
    assert len((folder / "qrels" / "ann.qrels").read_text().splitlines()) == len(pairs)
