"""How the labelling server writes to its sockets (issue 56, item 8): each response in one
send, on a connection with TCP_NODELAY. Two sends (headers, then body) made the body wait
for the browser's delayed ACK of the headers, about 40 ms of each key press."""

from __future__ import annotations

import http.client
import socket
import threading
from types import SimpleNamespace

from exam_eval.verify.label_server import LabelServer


class _Watched:
    """The server's side of a connection, as the handler gets it: every send recorded, with
    the socket's TCP_NODELAY at that moment; everything else is the real socket's."""

    def __init__(self, sock: socket.socket, sends: list):
        self._sock = sock
        self._sends = sends

    def _record(self, data) -> None:
        self._sends.append((bytes(data), self._sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))

    def sendall(self, data, *flags):
        self._record(data)
        return self._sock.sendall(data, *flags)

    def send(self, data, *flags):
        self._record(data)
        return self._sock.send(data, *flags)

    def __getattr__(self, name):
        return getattr(self._sock, name)


def test_each_response_is_one_send_on_a_nodelay_socket(tmp_path):
    sends: list[tuple[bytes, int]] = []

    class Watched(LabelServer):
        def get_request(self):
            sock, addr = super().get_request()
            return _Watched(sock, sends), addr

    # the chooser page, label.js, a 404 and a 415 need no design: only the folder's assessors
    server = Watched(SimpleNamespace(folder=str(tmp_path)), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)   # one keep-alive connection
        bodies = []
        for method, path in [("GET", f"/{server.token}/"), ("GET", f"/{server.token}/label.js"),
                             ("GET", f"/{server.token}x/api/ann/state"), ("POST", f"/{server.token}/api/ann/label")]:
            conn.request(method, path, body=b"at=0&label=1" if method == "POST" else None)
            r = conn.getresponse()
            bodies.append((r.status, r.read()))
            assert len(sends) == len(bodies), [s[0][:40] for s in sends]   # this response: one send
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    assert [s for s, _ in bodies] == [200, 200, 404, 415]
    assert b"who is labelling?" in bodies[0][1] and len(bodies[1][1]) > 1000 and bodies[2][1] == b"not found\n"
    for (data, nodelay), (_, body) in zip(sends, bodies):
        assert data.startswith(b"HTTP/1.1 ") and data.endswith(b"\r\n\r\n" + body)   # headers and body, whole
        assert nodelay, "TCP_NODELAY off on the server's socket when it sent a response"
