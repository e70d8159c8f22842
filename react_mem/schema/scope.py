"""Who owns a memory record, and who may see it: one value from the request to the store.

Every record has an owner scope: the flow's workspace, the request's collection, optionally
a user, and (where it applies) a conversation. The ownership rule:

- a record written with a user is visible only to requests with that same user;
- a request without a user sees only records written without one (the collection's
  shared memory), never another user's records;
- ``None`` and ``""`` both mean "no user" (TrustGraph clients send neither); every other
  value is an opaque id compared exactly (``"Alice"`` is not ``"alice"``, ``" "`` is a user)
  after the one normalisation every owner id gets where it enters (:func:`owner_id`, applied
  by every wire message and by ``Scope``): invisible format characters removed, then NFKC,
  so ``"alice\u200b"``, a decomposed ``"zoe\u0308"`` and ``"alice"`` in full-width letters
  are the owners ``"alice"``, ``"zoë"`` and ``"alice"``. An id that is nothing but invisible
  characters is refused.

The conversation narrows within an owner: a scope with a conversation sees that
conversation's records of its owner; one without sees all of its owner's. A conversation id
is never a credential: another owner's conversation id finds nothing.

Maintenance that spans owners (retention sweeps, idle conversations, a collection's quota)
uses the store's ``AllOwners``, a separate type that no request path builds.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from react_mem.errors import BadRequest

#: Payload keys that hold the scope on a stored record.
SCOPE_KEYS = ("scope_workspace", "scope_collection", "scope_user", "scope_conversation")


class ScopeRequired(BadRequest):
    def __init__(self, message: str) -> None:
        super().__init__(message, type="missing-scope")


def owner_id(value: str) -> str:
    """A user id as it is stored and compared: format characters (zero-width spaces and
    joiners, bidi controls, soft hyphens) removed, then NFKC-folded (composed and decomposed
    accents, compatibility forms such as full-width letters, are one id). Case and visible
    spaces are kept. Idempotent."""
    if value.isascii() and value.isprintable():
        return value
    visible = "".join(c for c in value if unicodedata.category(c) != "Cf")
    return unicodedata.normalize("NFKC", visible)


def _id(value: str | None) -> str | None:
    """An empty id is no id; any other is normalised (see :func:`owner_id`)."""
    return owner_id(value) or None if value else None


@dataclass(frozen=True, slots=True)
class Scope:
    """Workspace (from the flow) + collection (from the request) + optional user/conversation.

    Built normalised: ``user`` and ``conversation`` are ``None`` or non-empty strings.
    """

    workspace: str
    collection: str
    user: str | None = None
    conversation: str | None = None

    def __post_init__(self) -> None:
        if not self.workspace or not self.collection:
            raise ScopeRequired("a scope needs a workspace and a collection")
        object.__setattr__(self, "user", _id(self.user))
        object.__setattr__(self, "conversation", _id(self.conversation))

    def payload(self) -> dict[str, str]:
        """The scope keys stored on a record (only the parts that are set)."""
        values = (self.workspace, self.collection, self.user, self.conversation)
        return {k: v for k, v in zip(SCOPE_KEYS, values, strict=True) if v}

    def owner(self) -> Scope:
        """The owner alone: this scope without its conversation."""
        return Scope(self.workspace, self.collection, self.user)

    def with_conversation(self, conversation: str | None) -> Scope:
        """The same owner, narrowed to ``conversation`` (or to none)."""
        return Scope(self.workspace, self.collection, self.user, conversation)

    @classmethod
    def of_payload(cls, payload: Mapping[str, Any]) -> Scope:
        """The scope (owner and conversation) a stored record was written in."""
        keys = (payload.get(key) for key in SCOPE_KEYS)
        workspace, collection, user, conversation = (
            k if isinstance(k, str) else None for k in keys
        )
        return cls(workspace or "", collection or "", user, conversation)
