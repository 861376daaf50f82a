"""Importing autojudge-base offline.

autojudge-base 1.0.0 asks nltk for punkt and the stop-word list when it is imported
(``document/text_chunker.py``) and downloads them when they are missing, which fails
without a network (``LookupError: Resource 'stopwords' not found``). Its report,
leaderboard, qrels and nugget-bank code uses neither. :func:`prepare` puts a stand-in
nltk data folder in exam_eval's cache (our shipped English stop-word list and an empty
punkt folder) on nltk's search path when the real data is not installed, so
``import autojudge_base`` works offline. Installed nltk data is left alone.
"""

from __future__ import annotations

from pathlib import Path

from .grading.cache import user_cache_dir


def prepare() -> Path | None:
    """Make ``import autojudge_base`` work offline; returns the stand-in folder it put on
    nltk's path, or None when nltk already has both resources."""
    import nltk

    try:
        nltk.data.find("corpora/stopwords")
        nltk.data.find("tokenizers/punkt")
        return None
    except LookupError:
        pass

    root = user_cache_dir() / "nltk_data"
    (root / "tokenizers" / "punkt").mkdir(parents=True, exist_ok=True)
    words = root / "corpora" / "stopwords" / "english"
    if not words.exists():
        words.parent.mkdir(parents=True, exist_ok=True)
        words.write_text((Path(__file__).parent / "data" / "stopwords_en.txt").read_text(encoding="utf-8"),
                         encoding="utf-8")
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    return root
