"""ir_datasets IDs as inputs (topics, qrels, passages).

Resolution order everywhere: an existing path first, then an ir_datasets ID. ir_datasets
downloads on first use; offline that cannot work, so failures are turned into one line
that says what was tried and how to pre-place the files.
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Iterator

from ..errors import InputError

_HINT = ("ir_datasets keeps its files under ~/.ir_datasets (or $IR_DATASETS_HOME): load the dataset "
         "once on a connected machine and copy that folder here, or pass a local file instead")


def looks_like_irds_id(spec: str) -> bool:
    """Whether ``spec`` names a dataset of ir_datasets' registry (``msmarco-passage`` as well
    as ``msmarco-passage/trec-dl-2019/judged``). Asked of the registry itself, not guessed
    from a slash: top-level IDs have none, and a path may have one. An existing path
    always wins, so a file called ``msmarco-passage`` in the working directory is read as
    that file (the design's resolution order: path, then ID)."""
    if not spec or spec == "-" or os.path.exists(spec):
        return False
    try:
        import ir_datasets
    except ImportError:  # pragma: no cover - core dependency
        return False
    registry = ir_datasets.registry
    if spec in registry:  # iterates the registered names: nothing is built or fetched
        return True
    # families registered by a pattern (clirmatrix/...) are matched by it, not built:
    # building one (registry[spec]) downloads its listing
    return any(pattern.match(spec) for pattern, _ in getattr(registry, "_patterns", ()))


def unresolved(spec: str) -> InputError:
    """What a "FILE or ID" input that is neither an existing path nor a registered ID is
    told: both were tried. Said as a missing ID where the name reads as one (a slash, and
    no folder of that name), else as a missing file."""
    folder = os.path.dirname(spec)
    if folder and not spec.startswith((".", "/", "~")) and not os.path.isdir(folder):
        return InputError(UNKNOWN_ID, spec)
    return InputError("no such file (and not an ir_datasets ID such as msmarco-passage/trec-dl-2019/judged)", spec)


def refuse_unknown_id(spec: str) -> None:
    """For readers that open any other name as a file (whose refusal then says what is wrong
    with the path): refuse a missing name that reads as an ID, saying both were tried."""
    if spec != "-" and not os.path.lexists(spec):
        err = unresolved(spec)
        if err.reason == UNKNOWN_ID:
            raise err


UNKNOWN_ID = "not an existing file, and not a known ir_datasets ID"


@contextlib.contextmanager
def _bars_on_a_terminal_only() -> Iterator[None]:
    """ir_datasets' tqdm bars (a download, a docs store being built: minutes) stay on a
    terminal, where they are redrawn in place and wiped; in a batch log they would be
    text left before the command's own lines, a failure's one line included."""
    try:
        import tqdm
        from ir_datasets import lazy_libs

        cache = lazy_libs._cache  # where ir_datasets keeps the tqdm module it draws with
    except (ImportError, AttributeError):  # another ir_datasets: its bars as they are
        yield
        return

    class TerminalOnly(tqdm.tqdm):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("disable", None)  # tqdm's None: drawn on a terminal only
            super().__init__(*args, **kwargs)

    before = cache.get("tqdm")
    cache["tqdm"] = type(tqdm)("tqdm_terminal_only")
    cache["tqdm"].tqdm = TerminalOnly
    try:
        yield
    finally:
        if before is None:
            cache.pop("tqdm", None)
        else:
            cache["tqdm"] = before


@contextlib.contextmanager
def _fail_fast(spec: str, what: str) -> Iterator[None]:
    import logging

    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(15)  # a blocked network should fail in seconds, not minutes
    # ir_datasets logs every download retry to stderr (its loggers are made lazily at
    # INFO level); our one-line error says it all
    logging.disable(logging.WARNING)
    try:
        with _bars_on_a_terminal_only():
            yield
    except InputError:
        raise
    except KeyError:
        raise InputError(UNKNOWN_ID, spec) from None
    except Exception as exc:  # ir_datasets raises many types for download failures
        text = str(exc)
        if "download" in text.lower() or "connection" in text.lower() or isinstance(exc, OSError):
            reason = "download failed: no network?"
        else:
            reason = (text.splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(f"ir_datasets could not provide {what} ({reason}); " + _HINT, spec) from None
    finally:
        socket.setdefaulttimeout(old)
        logging.disable(logging.NOTSET)


def load_dataset(spec: str):
    try:
        import ir_datasets
    except ImportError:  # pragma: no cover - core dependency
        raise InputError("ir_datasets is not installed; pass a local file instead", spec) from None
    with _fail_fast(spec, "the dataset"):
        return ir_datasets.load(spec)


def irds_qrels(spec: str) -> dict[str, dict[str, int]]:
    ds = load_dataset(spec)
    if not ds.has_qrels():
        raise InputError("this ir_datasets dataset has no qrels", spec)
    qrels: dict[str, dict[str, int]] = {}
    with _fail_fast(spec, "qrels"):
        for q in ds.qrels_iter():
            qrels.setdefault(str(q.query_id), {})[str(q.doc_id)] = int(q.relevance)
    return qrels


def irds_queries(spec: str, *, details: bool = False) -> dict:
    """qid -> text; with ``details``, qid -> (text, description, narrative), the last two
    where the dataset's queries have them (TREC topics: TrecQuery's fields), else ""."""
    ds = load_dataset(spec)
    if not ds.has_queries():
        raise InputError("this ir_datasets dataset has no queries", spec)
    out: dict = {}
    with _fail_fast(spec, "queries"):
        for q in ds.queries_iter():
            text = getattr(q, "text", None) or getattr(q, "title", None) or getattr(q, "query", None)
            if text is None:
                text = " ".join(str(v) for v in q[1:] if isinstance(v, str))
            if details:
                more = [" ".join(str(getattr(q, f, None) or "").split()) for f in ("description", "narrative")]
                out[str(q.query_id)] = (str(text), *more)
            else:
                out[str(q.query_id)] = str(text)
    return out


def irds_docs(spec: str, wanted: set[str] | None) -> dict[str, str]:
    ds = load_dataset(spec)
    if not ds.has_docs():
        raise InputError("this ir_datasets dataset has no documents", spec)
    out: dict[str, str] = {}
    with _fail_fast(spec, "documents"):
        if wanted is None:
            docs = ds.docs_iter()
        else:
            docs = ds.docs_store().get_many(sorted(wanted)).values()
        for d in docs:
            text = getattr(d, "text", None) or getattr(d, "body", None) or ""
            title = getattr(d, "title", None)
            out[str(d.doc_id)] = f"{title}\n{text}" if title else str(text)
    return out
