"""Grading: published prompts, output parsing, answer verification."""
