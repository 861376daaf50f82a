"""The model clients: one registry for every command that talks to a model.

A back end name (``--backend``) maps to the roles it can take, each a ``"module:Class"``
imported on use, so listing back ends or resolving ``--backend`` never imports torch:

- ``score``: grade (passage, bank item) pairs with a published prompt
  (:class:`exam_eval.backends.base.Backend`; exam-grade, exam-nuggets support);
- ``chat``: answer a system and a user message, as the AutoNuggetizer asks
  (exam-nuggets assign, exam-genq nuggetize);
- ``complete``: write the text one prompt asks for (exam-genq generate).

The two text roles are one class, its methods ``chat`` and ``generate``
(:mod:`exam_eval.backends.chat`: a completion is a chat of one user message).
:func:`exam_eval.backends.factory.make_client` makes a client of any role from flags.
A new back end is one module plus one line here naming what it can do; every command
that takes that role then takes it, and every other says in one line what it needs.
What a back end can do besides its roles is a trait (``TRAITS``) in one more line: the
commands ask :func:`has` and :func:`names` for it and never compare a back end's name.
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
    "hf-seq2seq": {"score": "exam_eval.backends.hf_seq2seq:Seq2SeqBackend", "complete": "exam_eval.backends.chat:LocalChat"},
    "hf-causal": {"score": "exam_eval.backends.hf_causal:CausalBackend", "chat": "exam_eval.backends.chat:LocalChat",
                  "complete": "exam_eval.backends.chat:LocalChat"},
    "hf-qa": {"score": "exam_eval.backends.hf_qa:QABackend"},
    "endpoint": {"score": "exam_eval.backends.endpoint:EndpointBackend", "chat": "exam_eval.backends.chat:EndpointChat",
                 "complete": "exam_eval.backends.chat:EndpointChat"},
    "embedding": {"score": "exam_eval.backends.embedding:EmbeddingBackend"},
    "scripted": {"score": "exam_eval.backends.scripted:ScriptedBackend", "chat": "exam_eval.backends.chat:ScriptedChat",
                 "complete": "exam_eval.backends.chat:ScriptedChat"},
}


#: each trait: what a back end that has it does, asked by the commands in place of its name
TRAIT_MEANINGS = {
    "batch-files": "its requests go to an OpenAI-compatible server, so they can be written to and answered "
                   "from batch files (--batch-out, --batch-in)",
    "canned": "calls no model: a call count says nothing of cost",
    "no-tokenizer": "no Hugging Face tokenizer counts its prompts (a dry run estimates without one)",
}

#: the traits of each back end (beside CLIENTS: its targets are imported on use only)
TRAITS: dict[str, set[str]] = {
    "hf-seq2seq": set(),
    "hf-causal": set(),
    "hf-qa": set(),
    "endpoint": {"batch-files"},
    "embedding": {"no-tokenizer"},
    "scripted": {"canned", "no-tokenizer"},
}


def names(role: str | None, trait: str | None = None) -> list[str]:
    """The back ends that can take ``role`` (None: any) and have ``trait`` (None: any), in
    the registry's order."""
    return [name for name, roles in CLIENTS.items()
            if (role is None or role in roles) and (trait is None or has(name, trait))]


def has(name: str, trait: str) -> bool:
    """Whether back end ``name`` has ``trait`` (False for a name that is no back end)."""
    if trait not in TRAIT_MEANINGS:
        raise ValueError(f"unknown trait {trait!r}; traits: {', '.join(TRAIT_MEANINGS)}")
    return trait in TRAITS.get(name, ())


def listed(items: list[str], word: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``: back-end names in a message."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {word} {items[-1]}"


def register(name: str, role: str, target: str | type, traits: tuple[str, ...] = ()) -> None:
    """Add a back end's ``role``: ``"module:Class"`` (imported on use) or the class itself,
    and any ``traits`` it has."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    unknown = [t for t in traits if t not in TRAIT_MEANINGS]
    if unknown:
        raise ValueError(f"unknown trait {unknown[0]!r}; traits: {', '.join(TRAIT_MEANINGS)}")
    CLIENTS.setdefault(name, {})[role] = target
    if traits:
        TRAITS.setdefault(name, set()).update(traits)


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
