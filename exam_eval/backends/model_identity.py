"""What names a model's grades apart from its settings: the name grade lines record, and
the state of its files on disk. Part of every local back end's ``cache_identity``."""

from __future__ import annotations

import functools
import hashlib
import os


def model_name(model: str) -> str:
    """The model's name as grade lines record it: a local directory without a trailing
    slash, so that ``dir/`` and ``dir`` are one grader (tab completion adds the slash)."""
    if len(model) > 1 and model.endswith("/") and os.path.isdir(os.path.expanduser(model)):
        return model.rstrip("/") or "/"
    return model


def files_listing(real: str, hidden: bool = False) -> list[tuple[str, int, int]]:
    """(relative path, size, modification time in ns) of every file under the directory
    ``real``, in a fixed order; hidden folders (a download's ``.cache``) only with ``hidden``."""
    listing = []
    for root, dirs, files in os.walk(real):
        dirs[:] = sorted(d for d in dirs if hidden or not d.startswith("."))
        for f in sorted(files):
            st = os.stat(os.path.join(root, f))
            listing.append((os.path.relpath(os.path.join(root, f), real), st.st_size, st.st_mtime_ns))
    return listing


@functools.lru_cache(maxsize=16)
def _digest(path: str, listing: str) -> str:
    return hashlib.sha256(f"{path}\x00{listing}".encode()).hexdigest()[:12]


def model_files_id(ref: str) -> str:
    """``:files=...`` for a model on disk (a directory or a GGUF file): its files' names,
    sizes and modification times, so that weights replaced in place (a fine-tuning run
    writing to the same folder) make a different grader; "" for a hub id. Copying the
    folder elsewhere (new times) costs a regrade, never a stale grade."""
    if not os.path.exists(ref):
        return ""
    real = os.path.realpath(ref)
    if os.path.isdir(real):
        listing = files_listing(real)
    else:
        st = os.stat(real)
        listing = [(os.path.basename(real), st.st_size, st.st_mtime_ns)]
    return ":files=" + _digest(real, repr(listing))
