"""Running code that imports autojudge-base, offline.

autojudge-base 1.0.0 downloads nltk's punkt and stopwords when imported; its report,
leaderboard and qrels code uses neither. A stand-in nltk data directory (our stopword
list, an empty punkt folder) lets the import go through in a subprocess.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def stand_in_nltk_data(tmp: Path) -> Path:
    """tmp/nltk_data with what autojudge-base looks for on import: our stopword list as
    nltk's English stopwords, an empty punkt folder."""
    nltk_dir = tmp / "nltk_data"
    (nltk_dir / "tokenizers" / "punkt").mkdir(parents=True, exist_ok=True)
    (nltk_dir / "corpora" / "stopwords").mkdir(parents=True, exist_ok=True)
    (nltk_dir / "corpora" / "stopwords" / "english").write_text(
        (ROOT / "exam_eval" / "data" / "stopwords_en.txt").read_text())
    return nltk_dir


def autojudge_env(tmp: Path) -> dict:
    """Environment for a subprocess that imports autojudge_base; skips the test where it
    is not installed."""
    if importlib.util.find_spec("autojudge_base") is None:
        pytest.skip("autojudge-base is not installed")
    nltk_dir = stand_in_nltk_data(tmp)
    return dict(os.environ, NLTK_DATA=str(nltk_dir), PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
