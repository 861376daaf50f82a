"""A restart of the labelling server (issue 56, item 14): the token is kept in FOLDER/.token
(0600, never wider) and the port in FOLDER/.server.port, so the printed URL is the same and
a page left open (chromium, driven by keys) says the server is away, then goes on by itself
once it is back; --new-token rotates the token, and the old URL is answered 404."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
from urllib.parse import urlsplit

import pytest

from label_serving import serving
from test_label_page import Page, _start, browser  # noqa: F401  (the fixture)
from test_label_server import _raw

from exam_eval.verify.label_design import read_design
from exam_eval.verify.label_store import read_labels

AWAY = "stopped or moved"


def _token(url: str) -> str:
    return urlsplit(url).path.strip("/").split("/")[0]


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@contextlib.contextmanager
def _umask(mask: int):
    """MASK for the children started in the block (a child inherits its parent's)."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _wait_notice(tab: Page, says: bool) -> None:
    """Until the page's notice says the server is away (SAYS), or no longer does; the page
    retries every 3 s."""
    cond = ("" if says else "!") + f"t.includes({AWAY!r})"
    tab.page.wait_for_function(f"() => {{ const t = document.getElementById('notice').textContent; return {cond}; }}",
                               timeout=20000)


def test_a_restart_serves_the_same_url_and_the_open_page_goes_on(browser, tmp_path):  # noqa: F811
    folder, args = _start(tmp_path)
    with serving(*args, "--assessor", "ann") as server:
        pairs = read_design(str(folder)).pair_list()
        url = server.url
        tab = Page(browser, url)
        tab.press("2", 1)
        code, err = server.stop()
        assert code == 0, err
    assert (folder / ".token").read_text().strip() == _token(url) and _mode(folder / ".token") == 0o600
    tab.press("1")                                  # the server is gone: nothing kept, and the page says so
    _wait_notice(tab, True)
    notice = tab.text("#notice")
    assert "on disk" in notice and "exam-verify label" in notice and "same URL" in notice, notice
    assert tab.done() == 1 and tab.shown() == pairs[1]
    with serving(str(folder), "--assessor", "ann") as server:
        assert server.url == url                    # same token, same port
        _wait_notice(tab, False)                    # the page found it again, with no reload
        assert tab.text("#notice") == ""
        assert tab.done() == 1 and tab.shown() == pairs[1]
        tab.press("3", 2)                           # the next key labels the next pair
        assert tab.shown() == pairs[2]
        code, err = server.stop()
        assert code == 0, err
    assert read_labels(str(folder / "labels" / "ann.jsonl")).given == {pairs[0]: (2, ""), pairs[1]: (3, "")}
    # --new-token: another URL (on the same port); the old token is answered 404, and the
    # page still open at it says so at its next key
    with serving(str(folder), "--assessor", "ann", "--new-token") as server:
        assert _token(server.url) != _token(url) and urlsplit(server.url).port == urlsplit(url).port
        assert _raw(url)[0] == 404 and _raw(server.url)[0] == 200
        assert (folder / ".token").read_text().strip() == _token(server.url) and _mode(folder / ".token") == 0o600
        tab.press("0")
        _wait_notice(tab, True)
        assert tab.done() == 2 and server.api("ann", "state")["done"] == 2
        assert Page(browser, server.url).shown() == pairs[2]


def test_the_token_file_is_0600_under_a_umask_that_leaves_files_readable(tmp_path, run_cli):
    folder, args = _start(tmp_path)
    assert run_cli("exam-verify", "label", *args, "--no-serve").returncode == 0
    assert not (folder / ".token").exists()         # made when a server first starts
    with _umask(0o022), serving(str(folder)) as server:
        assert _mode(folder / ".token") == 0o600 and (folder / ".token").stat().st_uid == os.getuid()
        assert (folder / ".token").read_text() == _token(server.url) + "\n"
        assert (folder / ".server.port").read_text() == f"{urlsplit(server.url).port}\n"
        assert not [p for p in os.listdir(folder) if p.endswith(".tmp")]


def test_a_token_file_others_could_read_or_a_link_is_not_used(tmp_path, run_cli):
    folder, args = _start(tmp_path)
    assert run_cli("exam-verify", "label", *args, "--no-serve").returncode == 0
    leaked = "A" * 24
    (folder / ".token").write_text(leaked + "\n")
    os.chmod(folder / ".token", 0o644)
    with serving(str(folder)) as server:
        assert _token(server.url) != leaked and _mode(folder / ".token") == 0o600
        _, err = server.stop()
    assert f"{folder / '.token'}: others could read it (mode 0644" in err and "a new token" in err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(leaked + "\n")
    os.chmod(elsewhere, 0o600)
    (folder / ".token").unlink()
    (folder / ".token").symlink_to(elsewhere)      # a link is neither read nor written through
    with serving(str(folder)) as server:
        assert _token(server.url) != leaked
        assert not (folder / ".token").is_symlink() and _mode(folder / ".token") == 0o600
    assert elsewhere.read_text() == leaked + "\n"


def test_the_token_file_is_created_0600_and_exclusive_not_narrowed_later(tmp_path, run_cli):
    """Under strace: the only file .token ever was is created with O_EXCL and mode 0600 and
    renamed into place; nothing in the process changes a mode (a file made wider, then
    narrowed, is readable by others in between)."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    probe = subprocess.run([strace, "-o", os.devnull, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.strip()[:200]}")
    folder, args = _start(tmp_path)
    assert run_cli("exam-verify", "label", *args, "--no-serve").returncode == 0
    log = tmp_path / "strace.log"
    calls = "trace=open,openat,openat2,creat,rename,renameat,renameat2,chmod,fchmod,fchmodat,link,linkat"
    with _umask(0), serving(str(folder), wrap=[strace, "-f", "-e", calls, "-o", str(log)]) as server:
        token = _token(server.url)
    assert (folder / ".token").read_text() == token + "\n"
    trace = log.read_text()
    assert not re.search(r"\b(f?chmod|fchmodat)\(", trace), re.findall(r".*chmod.*", trace)
    made = [ln for ln in trace.splitlines()
            if re.search(r"open(at2?)?\(.*\.token", ln) and re.search(r"O_WRONLY|O_RDWR|O_CREAT", ln)]
    assert made and all("O_CREAT|O_EXCL" in ln and ", 0600)" in ln for ln in made), made
    tmp = re.search(r'"([^"]*\.token\.[0-9a-f]+\.tmp)"', made[0]).group(1)
    assert re.search(rf'rename(at2?)?\(.*"{re.escape(tmp)}".*"{re.escape(str(folder / ".token"))}"', trace)
