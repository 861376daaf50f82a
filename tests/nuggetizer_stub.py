"""A deterministic stand-in model for the AutoNuggetizer's three prompts, served by
:class:`openai_stub.OpenAIStub`, and a way to run the installed ``nuggetizer`` package's
own classes against it.

The answer depends only on the prompt (and, for the FLAKY marker, the temperature), so
two clients that send the same prompts get the same answers; the stub counts calls and
prompt tokens (words and punctuation marks of every message) as a server would bill them.

- creation ("NuggetizeLLM"): the initial list plus the first four words of every
  document of the window not yet in it;
- importance ("NuggetizeScoreLLM"): vital or okay by an md5 of the nugget text;
- assignment ("NuggetizeAssignerLLM"): support when every word of the nugget is in the
  passage, partial_support when some are (3-grade only), else not_support.

A passage or document holding FLAKY gets an unparseable answer at temperature 0 and a
good one when re-asked at 0.2; one holding BROKEN never gets a parseable answer.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import threading
from contextlib import contextmanager

from openai_stub import OpenAIStub, StubRequest

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _list_after(label: str, text: str) -> list[str]:
    m = re.search(re.escape(label) + r" (\[.*?\])\n", text + "\n", re.S)
    return ast.literal_eval(m.group(1)) if m else []


def answer(system: str, user: str, temperature: float) -> str:
    if "FLAKY" in user and not temperature:
        return "Sure! Here are the labels: support"
    if "BROKEN" in user:
        return "I cannot answer that."
    if system.startswith("You are NuggetizeAssignerLLM"):
        passage = re.search(r"\nPassage: (.*)\nNugget List: ", user, re.S).group(1)
        nuggets = _list_after("Nugget List:", user)
        have = _words(passage)
        labels = []
        for n in nuggets:
            words = _words(n)
            if words and words <= have:
                labels.append("support")
            elif words & have and "partial_support" in user:
                labels.append("partial_support")
            else:
                labels.append("not_support")
        return "```python\n" + repr(labels) + "\n```"
    if system.startswith("You are NuggetizeScoreLLM"):
        nuggets = _list_after("Nugget List:", user)
        return repr(["vital" if int(hashlib.md5(n.encode()).hexdigest(), 16) % 3 else "Okay" for n in nuggets])
    if system.startswith("You are NuggetizeLLM"):
        initial = _list_after("Initial Nugget List:", user)
        context = user.split("\nContext:\n", 1)[1].split("\nSearch Query: ", 1)[0]
        out = list(initial)
        for line in context.split("\n"):
            doc = re.sub(r"^\[\d+\] ", "", line)
            nugget = " ".join(doc.split()[:4])
            if nugget and nugget not in out:
                out.append(nugget)
        return repr(out)
    return "unknown prompt"


class CountingModel:
    """The stand-in server, counting calls and prompt tokens."""

    def __init__(self, port: int = 0):
        self.port = port  # another run's server again (the cache takes answers from the server that gave them)
        self.calls = 0
        self.prompt_tokens = 0
        self._lock = threading.Lock()
        self.stub = OpenAIStub(self._respond)

    def _respond(self, req: StubRequest) -> str:
        body = req.json
        msgs = body["messages"]
        system = next((m["content"] for m in msgs if m["role"] == "system"), "")
        user = "\n".join(m["content"] for m in msgs if m["role"] == "user")
        with self._lock:
            self.calls += 1
            self.prompt_tokens += sum(tokens(m["content"]) for m in msgs)
        return answer(system, user, float(body.get("temperature") or 0))

    def __enter__(self) -> CountingModel:
        self.stub.start(self.port)
        self.port = self.stub.port_in_use
        return self

    def __exit__(self, *exc) -> None:
        self.stub.stop()

    @property
    def url(self) -> str:
        return self.stub.url


@contextmanager
def nuggetizer_against(url: str, monkeypatch, **kwargs):
    """The nuggetizer package's ``Nuggetizer`` talking to ``url``. Its LLM handler asks
    tiktoken for an encoding after each answer (to count completion tokens), which
    downloads one; offline it gets a stand-in (the count is not used here)."""
    import nuggetizer.core.llm as llm
    from nuggetizer.models.nuggetizer import Nuggetizer

    class _Enc:
        def encode(self, text):
            return text.split()

    monkeypatch.setattr(llm.tiktoken, "get_encoding", lambda name: _Enc())
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "stub-key")
    monkeypatch.chdir(os.path.dirname(__file__))  # its load_dotenv reads ./.env
    yield Nuggetizer(model="stub-model", **kwargs)
