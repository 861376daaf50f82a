"""Prompt registry. Each module below registers one family of published prompts; adding a
family is one module plus one import line here. Imported by the back ends, the grading
session and everything above them; the family modules import only .base and the parsers.
"""

from pathlib import Path

from exam_eval.errors import UsageError
from exam_eval.grading.prompts.base import REGISTRY, Prompt, register
from exam_eval.grading.prompts.custom import load_prompt_file

__all__ = ["REGISTRY", "Prompt", "get_prompt", "register"]

from exam_eval.grading.prompts import exam_pp  # noqa: F401,E402
from exam_eval.grading.prompts import workbench  # noqa: F401,E402
from exam_eval.grading.prompts import direct  # noqa: F401,E402
from exam_eval.grading.prompts import umbrela  # noqa: F401,E402
from exam_eval.grading.prompts import ci_paper  # noqa: F401,E402
from exam_eval.grading.prompts import rag  # noqa: F401,E402


def get_prompt(name_or_path: str) -> Prompt:
    """A registered prompt by id, or a custom prompt loaded from an existing file."""
    # A published id wins over a file of the same name in the working directory; say
    # "file:sun" or "./sun" for the file. Files are re-read each time (they may be edited).
    if name_or_path in REGISTRY and not name_or_path.startswith("file:"):
        return REGISTRY[name_or_path]
    path = name_or_path[5:] if name_or_path.startswith("file:") else name_or_path
    if Path(path).is_file():
        return register(load_prompt_file(path))
    known = ", ".join(sorted(k for k in REGISTRY if not k.startswith("file:")))
    raise UsageError(f"unknown prompt {name_or_path!r} (neither a prompt id nor an existing file); "
                     f"known prompts: {known}")
