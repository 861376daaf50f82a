"""What every bin/exam-* does: run the command from this checkout without installing it,
with the checkout's .venv where `make install` made one (the python3 first on PATH may
lack the libraries: pytrec_eval, torch), and its package ahead of any installed copy."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv")


def run(name: str) -> None:
    python = os.path.join(VENV, "bin", "python")
    if os.path.isfile(python) and os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        os.execv(python, [python, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
    sys.path.insert(0, ROOT)
    from exam_eval.launch import run as launch

    launch(name)
