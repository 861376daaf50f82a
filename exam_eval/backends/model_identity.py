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


# a file up to this size is hashed whole; a larger one (weights) by its size and samples:
# its first and last 64 KiB (a safetensors header, the last tensor) and 256 blocks of 4 KiB
# spread evenly over it (one every 12 MB of flan-t5-large's 3 GB: a fine-tuning run
# changes far more than that). About 1.1 MiB read per weights file, whatever its size.
_WHOLE = 1 << 20
_EDGE = 64 << 10
_BLOCKS, _BLOCK = 256, 4 << 10
# files that change nothing a model computes
_IGNORED = (".md", ".rst", ".png", ".jpg", ".gitattributes", ".lock", ".metadata")


def _file_digest(path: str, size: int, h) -> None:
    with open(path, "rb") as fh:
        if size <= _WHOLE:
            h.update(fh.read())
            return
        h.update(fh.read(_EDGE))
        for k in range(_BLOCKS):
            fh.seek(_EDGE + (size - 2 * _EDGE - _BLOCK) * k // (_BLOCKS - 1))
            h.update(fh.read(_BLOCK))
        fh.seek(size - _EDGE)
        h.update(fh.read(_EDGE))


@functools.lru_cache(maxsize=16)
def _content_id(real: str, listing: tuple) -> str:
    """Keyed on the listing (sizes and times): a run reads each model's files once."""
    h = hashlib.sha256()
    base = real if os.path.isdir(real) else os.path.dirname(real)
    for rel, size, _mtime in listing:
        h.update(f"{rel}\x00{size}\x00".encode())
        _file_digest(os.path.join(base, rel), size, h)
    return h.hexdigest()[:12]


def model_files_id(ref: str) -> str:
    """``:files=...`` for a model on disk (a directory or a GGUF file): a digest of its
    files' names and contents (small files whole, weights by size and samples), so that
    weights replaced in place (a fine-tuning run writing to the same folder) make another
    grader, while the same files copied back (a job staging the model to local disk)
    stay the same one. "" for a hub id. Documentation files do not count."""
    if not os.path.exists(ref):
        return ""
    real = os.path.realpath(ref)
    if os.path.isdir(real):
        listing = [f for f in files_listing(real) if not f[0].lower().endswith(_IGNORED)]
    else:
        st = os.stat(real)
        listing = [(os.path.basename(real), st.st_size, st.st_mtime_ns)]
    return ":files=" + _content_id(real, tuple(listing))
