"""The labelling page's server: 127.0.0.1 only, every path behind a random token.

The token keeps other local users and other web sites' pages (which can reach
127.0.0.1 from the assessor's own browser) from reading passages or posting labels; the
Host check refuses a DNS-rebound name; the pages load nothing from another host, and the
Content-Security-Policy tells the browser to load nothing from one. The server answers
an action only once its label is on disk.

The token is kept in FOLDER/.token (0600) and the port in FOLDER/.server.port, so that a
restart serves the same URL and an open page finds the server again by itself.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
import stat
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from string import Template
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ..errors import InputError, OutputError, UsageError
from ..io.openers import display_name
from .label_session import LabelSession
from .label_store import ASSESSOR, assessors, sync_folder, write_all

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
ACTIONS = ("label", "skip", "undo", "cannot_judge", "goto")
MAX_BODY = 64 * 1024
TOKEN_FILE = ".token"
PORT_FILE = ".server.port"
TOKEN = re.compile(r"[A-Za-z0-9_-]{24,64}")


def check_action(action: str, body, top: int, n_pairs: int) -> None:
    """A ValueError (answered 400, nothing written) for a body the page could not have
    sent: a pair position that is not an integer of the design's (``at``), a label that is
    not an integer of the scale (JSON's true is no label), a note that is not text."""
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    if action in ("label", "skip", "cannot_judge", "goto"):
        at = body.get("at")
        if type(at) is not int or not 0 <= at < n_pairs:
            raise ValueError(f"at {json.dumps(at)} is not a pair's position (an integer 0-{n_pairs - 1})")
    if action == "label":
        label = body.get("label")
        if type(label) is not int or not 0 <= label <= top:
            raise ValueError(f"a label is an integer 0-{top}, not {json.dumps(label)}")
    if action in ("label", "cannot_judge") and not isinstance(body.get("note", ""), (str, type(None))):
        raise ValueError("a note is text")


def assessor_name(name: str) -> bool:
    """A name the labels can be kept under (labels/NAME.jsonl): label_store.check_assessor's rule."""
    return bool(ASSESSOR.fullmatch(name)) and not name.endswith(".jsonl")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def kept_token(folder: str, new: bool = False, log=lambda msg: None) -> str:
    """FOLDER's token: the one in FOLDER/.token, so that the last start's URL works again;
    a new one the first time, with ``new`` (--new-token), or where the file is not one only
    its owner can read (a token others may have read is no secret)."""
    path = os.path.join(folder, TOKEN_FILE)
    if not new:
        token, why = _read_token(path)
        if token is not None:
            return token
        if why:
            log(f"{display_name(path)}: {why}; a new token (pages open at the old URL need the new one)")
    token = secrets.token_urlsafe(18)
    _write_new(path, token + "\n", 0o600)
    return token


def _read_token(path: str) -> tuple[str | None, str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"not readable ({exc.strerror or exc})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_mode & 0o077 or st.st_uid != os.getuid():
            return None, f"others could read it (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid})"
        text = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return (text, "") if TOKEN.fullmatch(text) else (None, "not a token")


def _write_new(path: str, text: str, mode: int) -> None:
    """TEXT as PATH, whole or not at all: a new file created with MODE (never wider, even
    for a moment: a token written into a file others can open would leak), fsync'd, then
    renamed over PATH."""
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            write_all(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        sync_folder(os.path.dirname(path) or ".")
    except OSError as exc:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise OutputError(f"cannot write: {exc.strerror or exc}", display_name(path)) from None


def kept_port(folder: str) -> int | None:
    """The port of FOLDER's last server (FOLDER/.server.port), or None."""
    try:
        with open(os.path.join(folder, PORT_FILE), encoding="ascii") as f:
            port = int(f.read(16).strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def start_server(session: LabelSession, port: int, log=lambda msg: None) -> "LabelServer":
    """A server on PORT, or with PORT 0 on the last start's port (an open page's URL works
    again) where it is free, else on a free one."""
    last = kept_port(session.folder) if port == 0 else None
    if last is not None:
        try:
            return LabelServer(session, "127.0.0.1", last)
        except UsageError:
            log(f"port {last}, the last start's, is taken: another port, so pages open at the old URL need the "
                "new one")
    return LabelServer(session, "127.0.0.1", port)


def keep_port(folder: str, port: int) -> None:
    if kept_port(folder) != port:
        _write_new(os.path.join(folder, PORT_FILE), f"{port}\n", 0o644)


class LabelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, session: LabelSession, host: str, port: int):
        self.session = session
        self.token = secrets.token_urlsafe(18)
        self.assets = {n: _asset(n) for n in ("label.html", "label_choose.html", "label.js", "label.css")}
        try:
            super().__init__((host, port), Handler)
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    @property
    def port(self) -> int:
        return self.server_address[1]

    def url(self, assessor: str | None = None) -> str:
        base = f"http://127.0.0.1:{self.port}/{self.token}/"
        return base if assessor is None else f"{base}a/{quote(assessor)}/"


class Handler(BaseHTTPRequestHandler):
    server: LabelServer
    protocol_version = "HTTP/1.1"
    # a response goes out as soon as it is written: the page's next request is sent only
    # once this one's answer is in, so a segment held back (Nagle) is a pause per key
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:   # the terminal shows the URL and the summary only
        pass

    def _send(self, status: int, body: str | bytes, ctype: str = "text/plain; charset=utf-8",
              extra: dict | None = None) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        for k, v in {**HEADERS, "Content-Type": ctype, "Content-Length": str(len(data)), **(extra or {})}.items():
            self.send_header(k, v)
        # headers and body in one write: in two, the body waited on the browser's delayed
        # ACK of the headers (Nagle's algorithm), about 40 ms of each key's 50 (issue 56)
        head = b""
        if self.request_version != "HTTP/0.9":   # which has no headers (send_header kept none)
            head, self._headers_buffer = b"".join(self._headers_buffer) + b"\r\n", []
        self.wfile.write(head if self.command == "HEAD" else head + data)

    def _route(self) -> list[str] | None:
        """The path's parts after a right token, or None (answered 404: a wrong token and a
        wrong path look alike). A Host other than this loopback address is refused."""
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in {f"127.0.0.1:{self.server.port}", f"localhost:{self.server.port}"}:
            self._send(HTTPStatus.MISDIRECTED_REQUEST, "this server answers http://127.0.0.1 only\n")
            return None
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/")[1:]]
        if not parts or not hmac.compare_digest(parts[0].encode(), self.server.token.encode()):
            self._send(HTTPStatus.NOT_FOUND, "not found\n")
            return None
        return parts[1:]

    def do_GET(self) -> None:
        parts = self._route()
        if parts is None:
            return
        s = self.server
        if parts in ([], [""]):
            names = ", ".join(escape(n) for n in assessors(s.session.folder)) or "nobody yet"
            return self._send(200, Template(s.assets["label_choose.html"]).substitute(token=s.token, assessors=names),
                              "text/html; charset=utf-8")
        if parts == ["go"]:
            name = parse_qs(urlsplit(self.path).query).get("assessor", [""])[0]
            if not assessor_name(name):
                return self._send(400, "assessor name: 1-40 letters, digits, '.', '_' or '-', not ending in "
                                       "'.jsonl'\n")
            return self._send(303, "", extra={"Location": f"/{s.token}/a/{quote(name)}/"})
        if parts in (["label.js"], ["label.css"]):
            ctype = "text/javascript" if parts[0].endswith(".js") else "text/css"
            return self._send(200, s.assets[parts[0]], ctype + "; charset=utf-8")
        if len(parts) == 3 and parts[0] == "a" and parts[2] == "" and assessor_name(parts[1]):
            page = Template(s.assets["label.html"]).substitute(token=s.token, assessor=escape(parts[1]),
                                                               top=s.session.design.top_label)
            return self._send(200, page, "text/html; charset=utf-8")
        if len(parts) == 3 and parts[0] == "api" and parts[2] == "state" and assessor_name(parts[1]):
            return self._json(s.session.state(parts[1]))
        self._send(HTTPStatus.NOT_FOUND, "not found\n")

    def do_POST(self) -> None:
        parts = self._route()
        if parts is None:
            return
        if not (len(parts) == 3 and parts[0] == "api" and parts[2] in ACTIONS and assessor_name(parts[1])):
            return self._send(HTTPStatus.NOT_FOUND, "not found\n")
        # a JSON body only: a form another page posts cannot be one (it would need a preflight)
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            return self._send(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "JSON only\n")
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0:
                raise ValueError("a negative Content-Length")
            if length > MAX_BODY:
                raise ValueError("body too large")
            body = json.loads(self.rfile.read(length) or b"{}")
            check_action(parts[2], body, self.server.session.design.top_label, len(self.server.session.pairs))
            state = self.server.session.act(parts[1], parts[2], body)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            return self._send(HTTPStatus.BAD_REQUEST, f"bad request: {exc}\n")
        except InputError as exc:   # a log broken while the server ran (edited by hand)
            return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, f"{exc}\n")
        except OSError as exc:   # the label could not be kept: the page says so, and shows the same pair
            return self._send(HTTPStatus.INSUFFICIENT_STORAGE, f"the label was not kept: {exc.strerror or exc}\n")
        self._json(state)

    def _json(self, obj: dict) -> None:
        self._send(200, json.dumps(obj, ensure_ascii=False), "application/json; charset=utf-8")
