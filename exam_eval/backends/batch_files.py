"""Batch files: the endpoint back end's requests written to a file, and its answers read
back from one, for the OpenAI Batch API and vLLM's ``run_batch``.

Both services take the same JSONL: one request per line,
``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": {...}}``, and
answer with one line per request, in any order,
``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``.

The body of a request is the one the live client would send (the same functions build
it: :func:`exam_eval.backends.http_client.chat_body`), and an answer's body is read as the
live client reads a reply (:func:`exam_eval.backends.http_client.reply_of`): everything
after that (the parsing, the judge rules, the grade lines, the cache) is the back end's
own code, which sees a client that answers from the results file (:class:`Replay`) where
it would see the server.

The custom_id (stable; documented in man exam-grade, BATCH FILES)::

    exam_eval:1:<grader>:<request>:<name>

- ``grader``: 16 hex digits of SHA-256 over the command, the grader's identity (model,
  options, the prompt and its text): a results file of another grader is refused whole;
- ``request``: 16 hex digits of SHA-256 over the request's URL and body (canonical JSON):
  the answer is taken for exactly the request that was asked;
- ``name``: which work it is, for people (exam-grade: ``query:doc:item``); not read back.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..errors import InputError, OutputError, UsageError
from ..grading.types import NO_ANSWER, NOT_ASKED_AGAIN, NOT_SENT
from ..io.jsonl import iter_jsonl
from ..io.openers import display_name
from ..io.outputs import IN_PLACE, atomic_output, existing_non_regular, special_kind
from .http_client import CHAT_ROUTE, COMPLETIONS_ROUTE, ChatResult, chat_body, completion_body, reply_of
from .token_usage import TokenUsage

#: the OpenAI Batch API's limits per input file (vLLM's run_batch has none; one file per
#: shard is its unit of work)
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1000 * 1000
ID_PREFIX = "exam_eval:1:"
#: the answer a request gets while its batch file is written: nothing to record
#: (NOT_SENT, and NOT_ASKED_AGAIN below, live in grading.types, for the Asker to know them)
#: errors and missing answers named one by one before the count says the rest
NAMED = 10


def grader_tag(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def request_digest(route: str, body: dict) -> str:
    canonical = json.dumps(["/v1" + route, body], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def custom_id(tag: str, digest: str, name: str) -> str:
    return f"{ID_PREFIX}{tag}:{digest}:{name}"


class _FileClient:
    """What the back ends use of :class:`exam_eval.backends.http_client.OpenAIClient`,
    with a file in place of the server: bodies built as the live client builds them."""

    base_url = "(a batch file)"
    #: what a progress bar counts: answers read from a file, not calls to a server
    from_files = True

    def __init__(self, model: str):
        self.model = model
        self.usage = TokenUsage()

    def list_models(self, timeout: float = 10.0) -> None:
        return None  # no server to ask; the results' bodies name the model that answered

    def chat(self, conversations: Sequence[Sequence[dict]], *, progress=None, **kw: Any) -> list[ChatResult]:
        results = self._answer(CHAT_ROUTE, [chat_body(self.model, m, **kw) for m in conversations])
        if callable(progress):
            for res in results:
                progress(res)
        return results

    def complete(self, prompts: Sequence[str], *, progress=None, **kw: Any) -> list[ChatResult]:
        return self._answer(COMPLETIONS_ROUTE, [completion_body(self.model, p, **kw) for p in prompts])

    def _answer(self, route: str, bodies: list[dict]) -> list[ChatResult]:
        raise NotImplementedError


class Recorder(_FileClient):
    """Takes the requests down instead of sending them; every call "fails" (nothing to record)."""

    def __init__(self, model: str):
        super().__init__(model)
        self.asked: list[tuple[str, dict]] = []

    def _answer(self, route, bodies):
        self.asked += [(route, b) for b in bodies]
        return [ChatResult(None, NOT_SENT, None, 0) for _ in bodies]

    def take(self) -> list[tuple[str, dict]]:
        asked, self.asked = self.asked, []
        return asked


@dataclass
class Answer:
    where: str  # "FILE line N"
    custom_id: str
    body: dict | None  # the reply body; None: the service answered an error
    error: str | None




class Replay(_FileClient):
    """Answers each request from the results files, by its key: the request's digest, and
    for the n-th asking of one request in a run (n >= 2: a re-ask at temperature 0.2 sent
    as it was) the digest with ``.n``. Without an answer a request fails as a call after
    its last retry does (not recorded), unless ``record``: then it is taken down for the
    next batch file (:attr:`asked`). ``reask_temperature``: a request at that temperature
    is a re-ask of an answer that did not parse; without an answer and without ``record``
    its last answer stands (:data:`NOT_ASKED_AGAIN`), as after the last live re-ask. With
    ``record``, a request answered with an error is taken down again too (its custom_id
    unchanged: of the two answers the successful one wins)."""

    def __init__(self, model: str, answers: dict[str, Answer], names: dict[str, str] | None = None, *,
                 record: bool = False, reask_temperature: float | None = None, name: str = ""):
        super().__init__(model)
        self.answers = answers
        self.names = names or {}  # key -> custom_id of this run's requests (where known before)
        self.record = record
        self.reask_temperature = reask_temperature
        self.name = name  # the custom_id's last part for requests met only now
        self.tag = ""
        self.seen: dict[str, int] = {}
        self.asked: list[tuple[str, str, dict]] = []  # (custom_id, route, body) to write
        self.missing: list[str] = []  # custom_ids without an answer
        self.errors: list[Answer] = []
        self.not_reasked = 0
        self.used: set[str] = set()
        #: answered with an error and taken down again (``record``): the next batch file asks them
        self.reasked_errors: list[Answer] = []

    def _answer(self, route, bodies):
        out = []
        for body in bodies:
            digest = request_digest(route, body)
            n = self.seen.get(digest, 0) + 1
            self.seen[digest] = n
            key = digest if n == 1 else f"{digest}.{n}"
            got = self.answers.get(key)
            if got is None:
                cid = self.names.get(key) or custom_id(self.tag, key, self.name)
                if self.record:
                    self.asked.append((cid, route, body))
                    out.append(ChatResult(None, NOT_SENT, None, 0))
                elif self.reask_temperature is not None and body.get("temperature") == self.reask_temperature:
                    self.not_reasked += 1
                    out.append(ChatResult(None, NOT_ASKED_AGAIN, None, 0))
                else:
                    self.missing.append(cid)
                    out.append(ChatResult(None, NO_ANSWER, None, 0))
                continue
            self.used.add(key)
            reply = None if got.body is None else reply_of(route, got.body)
            error = got.error if reply is None else reply.error
            if error is not None and self.record:  # asked again in the next batch file, as a live call is retried
                self.asked.append((self.names.get(key) or got.custom_id, route, body))
                self.reasked_errors.append(Answer(got.where, got.custom_id, None, error))
                out.append(ChatResult(None, NOT_SENT, None, 0))
                continue
            if reply is None:
                self.errors.append(got)
                out.append(ChatResult(None, f"the batch service answered an error: {got.error}", None, 1))
                continue
            if reply.error is not None:
                self.errors.append(Answer(got.where, got.custom_id, None, reply.error))
            else:
                self.usage.add(reply.usage)
            out.append(reply)
        return out

    def report(self) -> list[str]:
        """The errors and missing answers, named (the first NAMED of each) and counted."""
        lines = [f"{a.where}: {a.custom_id}: {a.error}" for a in self.errors[:NAMED]]
        if len(self.errors) > NAMED:
            lines.append(f"... and {len(self.errors) - NAMED} more answered with an error")
        lines += [f"no answer for {cid}" for cid in self.missing[:NAMED]]
        if len(self.missing) > NAMED:
            lines.append(f"... and {len(self.missing) - NAMED} more requests without an answer")
        if self.errors or self.missing:
            lines.append(f"{len(self.errors)} requests were answered with an error, {len(self.missing)} have no answer")
        return lines


def _error_text(line: dict) -> str | None:
    """Why a results line holds no answer (None: it holds one)."""
    error = line.get("error")
    response = line.get("response")
    if error not in (None, "", {}):
        if isinstance(error, dict):
            return str(error.get("message") or error.get("code") or json.dumps(error))
        return str(error)
    if not isinstance(response, dict):
        return "no response"
    status = response.get("status_code", 200)
    body = response.get("body")
    if status != 200:
        said = body.get("error") if isinstance(body, dict) else None
        message = said.get("message") if isinstance(said, dict) else said
        return f"status {status}" + (f": {message}" if message else "")
    if not isinstance(body, dict):
        return "response without a body"
    return None


def read_results(paths: Iterable[str], tag: str, what: str) -> dict[str, Answer]:
    """The answers of the results files by request digest. A line that is not a results
    line, or answers another grader (``tag``), refuses the file: one line naming file and
    line. Of several answers to one request a successful one wins (an error answered in one
    round, the answer in the next); two successful answers that differ refuse the file
    (naming both lines); the same answer twice (a results file given twice) is one."""
    answers: dict[str, Answer] = {}
    for path in paths:
        name = display_name(path)
        for lineno, line in iter_jsonl(path):
            cid = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(cid, str):
                raise InputError("not a batch results line (no custom_id)", name, lineno)
            if not cid.startswith(ID_PREFIX) or cid.count(":") < 4:
                raise InputError(f"custom_id {cid[:80]!r} was not written by exam_eval's --batch-out", name, lineno)
            their_tag, digest = cid[len(ID_PREFIX):].split(":", 2)[:2]
            if their_tag != tag:
                raise InputError(f"answers the requests of another grader (custom_id grader {their_tag}, this run's "
                                 f"{tag}: another model, prompt, options or {what}); refused, not mixed in",
                                 name, lineno)
            error = _error_text(line)
            answer = Answer(f"{name} line {lineno}", cid, None if error else line["response"]["body"], error)
            first = answers.get(digest)
            if first is not None and first.body is not None and answer.body is not None and first.body != answer.body:
                # two answers to one request that say different things (grade 1 here, 4 there):
                # which one holds cannot be told, and neither is taken silently
                raise InputError(f"a second answer to the request {cid[:100]!r}, unlike the first ({first.where}): "
                                 "which one holds cannot be told; keep one of them", name, lineno)
            if first is None or (first.body is None and answer.body is not None):
                answers[digest] = answer
    return answers


def request_line(cid: str, route: str, body: dict) -> str:
    return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1" + route, "body": body},
                      ensure_ascii=False) + "\n"


def part_paths(path: str, parts: int) -> list[str]:
    """FILE for the first part, FILE with -2, -3 ... before its extension for the others."""
    stem, ext = os.path.splitext(path)
    if ext.lower() != ".jsonl":
        stem, ext = path, ""
    return [path] + [f"{stem}-{i}{ext}" for i in range(2, parts + 1)]


def _not_replaceable(part: str, tag: str, command: str) -> str | None:
    """Why --batch-out may not replace the file ``part`` (None: it may), as the words after
    its name: it must be an earlier request file of this run, its first line's custom_id
    carrying ``tag``, or empty (0 bytes: nothing to lose). A file whose first line is
    blank is a user's."""
    try:
        with open(part, "rb") as fh:
            first = fh.readline(1 << 20)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return "is a folder: give a file name"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc}): it is not replaced"
    if first == b"":
        return None
    try:
        line = json.loads(first)
    except (ValueError, UnicodeDecodeError, RecursionError):
        line = None
    cid = line.get("custom_id") if isinstance(line, dict) else None
    if isinstance(cid, str) and cid.startswith(f"{ID_PREFIX}{tag}:") and "body" in line:
        return None
    what = ("holds the requests of another run (another command, model, prompt or options)"
            if isinstance(cid, str) and cid.startswith(ID_PREFIX) else "is not a request file of " + command)
    return f"exists and {what}: it is not replaced; remove it or give another file name"


def check_batch_out(path: str, tag: str, command: str) -> None:
    """--batch-out may replace an earlier request file of this run (the same command and
    grader: its lines' custom_id carries ``tag``), and nothing else: a bank, a grades file,
    anything a user made stays as it is (a usage error, before any work). Checked for the
    parts a split wrote too (FILE-2.jsonl ...); an empty file holds nothing to lose. A
    character device or FIFO (/dev/null, a pipe) is written in place and not read (a
    FIFO's reader would lose what it took); a socket or block device is refused."""
    kind = special_kind(path)
    if kind in IN_PLACE:
        return
    if kind is not None:
        raise UsageError(f"--batch-out {path} is {kind}, not a file: give a file name (a FIFO or a character "
                         "device such as /dev/null is written in place)")
    for part in _written_parts(path):
        why = _not_replaceable(part, tag, command)
        if why is not None:
            raise UsageError(f"--batch-out {part} {why}")


def _written_parts(path: str):
    """FILE, then FILE-2.jsonl, FILE-3.jsonl ... as far as they exist (an earlier split)."""
    yield path
    k = 2
    while os.path.lexists(part := part_paths(path, k)[-1]):
        yield part
        k += 1


def write_requests(path: str, lines: Sequence[str], max_requests: int | None = None,
                   max_bytes: int | None = None, tag: str | None = None) -> WrittenRequests:
    """Write request lines to ``path``, split where a file would pass the Batch API's
    limits; each file appears whole or not at all (io.outputs.atomic_output: a link is
    written through, a character device or FIFO is written in place, in one stream, since
    the limits are a file's). An earlier round's parts past the new ones (FILE-3.jsonl of
    a round that split in three, where this one splits in two) are this run's own
    (``tag``): removed, and named in the result."""
    max_requests = max_requests or MAX_REQUESTS
    max_bytes = max_bytes or MAX_BYTES
    groups: list[list[str]] = [[]]
    size = 0
    in_place = existing_non_regular(path)
    for line in lines:
        n = len(line.encode("utf-8"))
        if n > max_bytes and not in_place:
            raise UsageError(f"one request is {n:,} bytes, above a batch file's {max_bytes:,}")
        if groups[-1] and not in_place and (len(groups[-1]) >= max_requests or size + n > max_bytes):
            groups.append([])
            size = 0
        groups[-1].append(line)
        size += n
    written = WrittenRequests()
    for target, group in zip(part_paths(path, len(groups)), groups):
        # plain JSONL whatever the name: the batch services read no gzip
        with atomic_output(target, gz=False) as out:
            out.writelines(group)
        written.append((target, len(group)))
    if not in_place and tag is not None:
        for part in list(_written_parts(path))[len(groups):]:
            if os.path.isfile(part) and _not_replaceable(part, tag, "") is None:
                try:
                    os.unlink(part)
                except OSError as exc:
                    raise OutputError(f"cannot remove an earlier round's part: {exc.strerror or exc}", part) from None
                written.removed.append(part)
    return written


class WrittenRequests(list):
    """(file, requests) of each file written, and ``removed``: an earlier round's parts
    that this round's split no longer has."""

    def __init__(self):
        super().__init__()
        self.removed: list[str] = []

    def summary(self) -> str:
        files = ", ".join(f"{p} ({n:,})" for p, n in self)
        gone = self.removed
        if gone:
            files += "; an earlier round's " + (", ".join(gone) if len(gone) <= 3 else
                                                 f"{gone[0]} ... {gone[-1]} ({len(gone)} files)") + " removed"
        return files


def record_bodies(backend, requests: Sequence, ask: Callable[[Any], None]) -> list[list[tuple[str, dict]]]:
    """The request bodies ``backend`` would send for each of ``requests``, in order (one
    call of ``ask(request)`` each, with a :class:`Recorder` as its client)."""
    recorder = Recorder(backend.model_id)
    saved = backend.client
    backend.client = recorder
    try:
        out = []
        for request in requests:
            ask(request)
            out.append(recorder.take())
        return out
    finally:
        backend.client = saved
