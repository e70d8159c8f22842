"""Playbook identity and record layout: scope keys, bullet ids, payloads, the policy.

A playbook is workspace + collection + ``context_scope_id`` + owner. The owner is a user
(that user's private playbook: the lessons of their own trajectories) or none (the
collection-wide playbook: seeds, promoted lessons, and what user-less requests learn, the
ownership rule's shared memory). Records are written under the store scope workspace +
collection + owner, so the store's ownership filter keeps one owner's bullets, snapshots
and delta records from every other owner; they also carry ``context_key`` =
``"c:" + context_scope_id`` (never empty, so the default context ``""`` is a value like
any other), and every query adds ``context_key == …``. Who else may read or change a
playbook is :mod:`.access`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_services.store.base import Condition, FieldType, Scope
from react_mem.schema.playbook import Bullet

#: uuid5 namespace of bullet and history record ids (fixed: changing it orphans records).
NAMESPACE = uuid.UUID("3b0f8d6e-2c4a-5e1f-9b7d-6a5c4e3f2d10")
#: ``expires_at`` of bullets without a TTL, so "unexpired" is one range condition.
NEVER = 32503680000.0  # 3000-01-01T00:00:00Z
SECONDS_PER_DAY = 86400.0
#: The strength a bullet's active memory type starts with, and the baseline that
#: normalises decay scores to [0, 1] for retrieval (seed 001: "divided by baseline").
INITIAL_STRENGTH = 1.0
BASELINE_STRENGTH = 1.0
#: The weakest a bullet gets when ``reinforcement_gain`` ties strength to its counters.
MIN_STRENGTH = 0.1
#: Retrieval-only fields: never stored, never part of a version.
RETRIEVAL_FIELDS = frozenset({"score", "relevance", "strength", "decay_score"})
#: Payload indexes besides the scope keys.
BULLET_INDEXES = {"context_key": FieldType.KEYWORD, "expires_at": FieldType.FLOAT}

_SPACE = re.compile(r"\s+")
_TRAILING = ".!;,"


@dataclass(frozen=True, kw_only=True)
class PlaybookPolicy:
    """The service's tuning and limits (built from its settings). These defaults are the
    shipped ones, everywhere: the settings take theirs from here, and no deployment file
    overrides them (docs/ace.md gives the measured reasons)."""

    semantic_decay: float = 0.01
    episodic_decay: float = 0.05
    procedural_decay: float = 0.002
    reinforce_threshold: float = 0.9
    dedup_threshold: float = 0.85
    max_bullets: int = 100
    user_boost: float = 0.1
    topic_boost: float = 0.1
    #: The relevance floor (cosine; ``hybrid``'s mean) and its ``jaccard`` counterpart.
    min_relevance: float = 0.2
    min_jaccard: float = 0.0
    #: Places the ``always`` bullets below the floor may take in one retrieval.
    general_slots: int = 2
    #: Strength 1 + gain * (helpful - harmful), within [MIN_STRENGTH, max_strength].
    reinforcement_gain: float = 1.0
    max_strength: float = 1000.0
    #: Seed 003's auto-pruning of bullets marked harmful this much more than helpful.
    harmful_margin: int = 1
    version_retention: int = 50
    history_retention: int = 10_000
    max_content_chars: int = 2000
    max_operations: int = 256
    max_list_limit: int = 1000
    cache_scopes: int = 256

    def relevance_floor(self, relevance: str) -> float:
        """The least relevance a retrieved bullet has: word overlap (``jaccard``) runs on
        another scale than cosine similarity (``embedding``, ``hybrid``)."""
        return self.min_jaccard if relevance == "jaccard" else self.min_relevance


@dataclass(frozen=True, slots=True)
class ScopeKey:
    """One playbook: the flow's workspace, the request's collection and context scope, and
    its owner (a user, or ``None``: the collection-wide playbook; ``""`` is ``None``)."""

    workspace: str
    collection: str
    context: str = ""
    owner: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "owner", self.owner or None)

    @property
    def store_scope(self) -> Scope:
        return Scope(self.workspace, self.collection, self.owner)

    def of(self, owner: str | None) -> ScopeKey:
        """The playbook of ``owner`` in the same workspace, collection and context."""
        return ScopeKey(self.workspace, self.collection, self.context, owner)

    @property
    def context_key(self) -> str:
        return "c:" + self.context

    def where(self) -> list[Condition]:
        """The condition every query of this playbook carries."""
        return [Condition(key="context_key", equals=self.context_key)]

    def record_id(self, *parts: str) -> str:
        # The collection-wide playbook keeps the ids it had before playbooks had owners.
        owner = () if self.owner is None else ("\x00user", self.owner)
        key = "\x1f".join((self.workspace, self.collection, self.context, *owner, *parts))
        return str(uuid.uuid5(NAMESPACE, key))

    @property
    def label(self) -> str:
        """For logs: ``workspace/collection[context]`` (a user's: ``…[context]~user``)."""
        mine = "" if self.owner is None else "~private"
        return f"{self.workspace}/{self.collection}[{self.context}]{mine}"


def normalise(content: str) -> str:
    """Compatibility-normalised, case-folded, whitespace collapsed, trailing stops dropped."""
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", content).casefold()).strip()
    return text.rstrip(_TRAILING).rstrip()


def content_hash(normalised: str) -> str:
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def bullet_id(key: ScopeKey, normalised: str, taken: Mapping[str, Bullet]) -> str:
    """The id of new content: a hash of scope + normalised content (seed 001). An UPDATE
    keeps a bullet's id while its content changes, so the derived id may already name
    another bullet; then a counter is appended (deterministically)."""
    digest = content_hash(normalised)
    candidate, n = key.record_id("bullet", normalised), 1
    while candidate in taken and taken[candidate].content_hash != digest:
        n += 1
        candidate = key.record_id("bullet", normalised, str(n))
    return candidate


def expires_at(bullet: Bullet) -> float:
    if bullet.ttl_days is None:
        return NEVER
    return bullet.created_at + bullet.ttl_days * SECONDS_PER_DAY


def stored(bullet: Bullet) -> Bullet:
    """The bullet without retrieval fields (what versions and the store hold)."""
    return bullet.model_copy(update=dict.fromkeys(RETRIEVAL_FIELDS))


def to_payload(key: ScopeKey, bullet: Bullet) -> dict[str, Any]:
    fields = bullet.model_dump(mode="json", exclude={"id", *RETRIEVAL_FIELDS})
    return (
        key.store_scope.payload()
        | fields
        | {
            "context_key": key.context_key,
            "expires_at": expires_at(bullet),
        }
    )


def from_payload(id: str, payload: Mapping[str, Any]) -> Bullet:
    fields = {k: v for k, v in payload.items() if k in Bullet.model_fields}
    return Bullet.model_validate({**fields, "id": id})
