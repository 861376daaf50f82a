"""The labelling page's server: 127.0.0.1 only, every path behind a random token.

The token keeps other local users and other web sites' pages (which can reach
127.0.0.1 from the assessor's own browser) from reading passages or posting labels; the
Host check refuses a DNS-rebound name; the pages load nothing from another host, and the
Content-Security-Policy tells the browser to load nothing from one. The server answers
an action only once its label is on disk.
"""

from __future__ import annotations

import hmac
import json
import secrets
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from string import Template
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ..errors import InputError, UsageError
from .label_session import LabelSession
from .label_store import ASSESSOR, assessors

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
ACTIONS = ("label", "skip", "undo")
MAX_BODY = 64 * 1024


def check_action(action: str, body, top: int, n_pairs: int) -> None:
    """A ValueError (answered 400, nothing written) for a body the page could not have
    sent: a pair position that is not an integer of the design's (``at``), a label that is
    not an integer of the scale (JSON's true is no label), a note that is not text."""
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    if action in ("label", "skip"):
        at = body.get("at")
        if type(at) is not int or not 0 <= at < n_pairs:
            raise ValueError(f"at {json.dumps(at)} is not a pair's position (an integer 0-{n_pairs - 1})")
    if action == "label":
        label = body.get("label")
        if type(label) is not int or not 0 <= label <= top:
            raise ValueError(f"a label is an integer 0-{top}, not {json.dumps(label)}")
        if not isinstance(body.get("note", ""), (str, type(None))):
            raise ValueError("a note is text")


def assessor_name(name: str) -> bool:
    """A name the labels can be kept under (labels/NAME.jsonl): label_store.check_assessor's rule."""
    return bool(ASSESSOR.fullmatch(name)) and not name.endswith(".jsonl")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


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

    def log_message(self, format, *args) -> None:   # the terminal shows the URL and the summary only
        pass

    def _send(self, status: int, body: str | bytes, ctype: str = "text/plain; charset=utf-8",
              extra: dict | None = None) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        for k, v in {**HEADERS, "Content-Type": ctype, "Content-Length": str(len(data)), **(extra or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

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
