"""The model clients: one registry for every command that talks to a model.

A back end name (``--backend``) maps to the roles it can take, each a ``"module:Class"``
imported on use, so listing back ends or resolving ``--backend`` never imports torch:

- ``score``: grade (passage, bank item) pairs with a published prompt
  (:class:`exam_eval.backends.base.Backend`; exam-grade, exam-nuggets support);
- ``chat``: answer a system and a user message, as the AutoNuggetizer asks
  (:mod:`exam_eval.backends.chat`; exam-nuggets assign, exam-genq nuggetize);
- ``complete``: write the text one prompt asks for (:mod:`exam_eval.backends.generators`;
  exam-genq generate).

A new back end is one module plus one line here naming what it can do; every command
that takes that role then takes it, and every other says in one line what it needs.
"""

from __future__ import annotations

import importlib

from ..errors import UsageError

#: each role: what a back end without it cannot do, and the commands that need it
ROLES = {
    "score": ("grade passages with the published prompts", "exam-grade, exam-nuggets support"),
    "chat": ("run the AutoNuggetizer's prompts, free text from a system and a user message",
             "exam-nuggets assign, exam-genq nuggetize"),
    "complete": ("write a bank from the generation prompts", "exam-genq generate"),
}

CLIENTS: dict[str, dict[str, str | type]] = {
    "hf-seq2seq": {"score": "exam_eval.backends.hf_seq2seq:Seq2SeqBackend",
                   "complete": "exam_eval.backends.generators:HFGenerator"},
    "hf-causal": {"score": "exam_eval.backends.hf_causal:CausalBackend", "chat": "exam_eval.backends.chat:HFChat",
                  "complete": "exam_eval.backends.generators:HFGenerator"},
    "hf-qa": {"score": "exam_eval.backends.hf_qa:QABackend"},
    "endpoint": {"score": "exam_eval.backends.endpoint:EndpointBackend", "chat": "exam_eval.backends.chat:EndpointChat",
                 "complete": "exam_eval.backends.generators:EndpointGenerator"},
    "embedding": {"score": "exam_eval.backends.embedding:EmbeddingBackend"},
    "scripted": {"score": "exam_eval.backends.scripted:ScriptedBackend", "chat": "exam_eval.backends.chat:ScriptedChat",
                 "complete": "exam_eval.backends.generators:ScriptedGenerator"},
}


def names(role: str) -> list[str]:
    """The back ends that can take ``role``, in the registry's order."""
    return [name for name, roles in CLIENTS.items() if role in roles]


def register(name: str, role: str, target: str | type) -> None:
    """Add a back end's ``role``: ``"module:Class"`` (imported on use) or the class itself."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    CLIENTS.setdefault(name, {})[role] = target


def check(name: str, role: str) -> None:
    """A usage error, in one line, for a name that is no back end or cannot take ``role``."""
    if name not in CLIENTS:
        raise UsageError(f"unknown back end {name!r}; known back ends: {', '.join(names(role))}")
    if role not in CLIENTS[name]:
        what, commands = ROLES[role]
        raise UsageError(f"back end {name!r} cannot {what} ({commands}); choose from: {', '.join(names(role))}")


def client_class(name: str, role: str) -> type:
    check(name, role)
    target = CLIENTS[name][role]
    if isinstance(target, type):
        return target
    module, _, cls = target.partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise UsageError(f"back end {name!r} is not available: {exc} "
                         "(install the model extras: pip install 'exam_eval[models]')") from None
    return getattr(mod, cls)
