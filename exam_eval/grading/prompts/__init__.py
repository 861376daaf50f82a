"""Prompt registry. Each module below registers one family of published prompts."""

from exam_eval.grading.prompts.base import REGISTRY, Parsed, Prompt, get_prompt, register  # noqa: F401
