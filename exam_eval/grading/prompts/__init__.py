"""Prompt registry. Each module below registers one family of published prompts; adding a
family is one module plus one import line here."""

from exam_eval.grading.prompts.base import REGISTRY, Parsed, Prompt, get_prompt, register  # noqa: F401

from exam_eval.grading.prompts import exam_pp  # noqa: F401,E402
from exam_eval.grading.prompts import workbench  # noqa: F401,E402
from exam_eval.grading.prompts import direct  # noqa: F401,E402
from exam_eval.grading.prompts import umbrela  # noqa: F401,E402
from exam_eval.grading.prompts import ci_paper  # noqa: F401,E402
from exam_eval.grading.prompts import rag  # noqa: F401,E402
