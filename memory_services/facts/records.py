"""Fact records: identity, payload layout, read filters and the reinforcement rule.

A fact's identity scope is workspace + collection + user: identical normalised content there
is one record (``fact_id``). The conversation a fact was learned in is kept in the
``scope_conversation`` key, so reads and purges can narrow to it, but it is not part of the
identity: a fact restated in a later conversation reinforces the first record.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from memory_services import when
from memory_services.consolidation.engine import IMPORTANCE_THRESHOLD
from memory_services.store.base import Condition, FieldType, Scope
from react_mem.schema.facts import Fact

#: How a fact's sentence vectors are made (:attr:`FactPolicy.sentence_pooling`).
SentencePooling = Literal["separate", "late", "late-label"]

#: uuid5 namespace of fact ids (fixed: changing it would orphan every stored fact).
FACT_NAMESPACE = uuid.UUID("6f1c1f0e-5b7a-4d0e-9a43-3f7f1e2a9c10")
#: ``expires_at`` stored for facts that never expire, so "unexpired" is one range condition.
NEVER = 32503680000.0  # 3000-01-01T00:00:00Z
#: Payload indexes besides the scope keys.
INDEXES = {
    "current": FieldType.BOOL,
    "expires_at": FieldType.FLOAT,
    "valid_at": FieldType.FLOAT,
    "tells_time": FieldType.BOOL,
    "slot": FieldType.KEYWORD,
    "slot_rules": FieldType.INTEGER,
    "valid_until": FieldType.FLOAT,
}

#: Payload keys a retrieval neither ranks by nor returns (nor reads after its search): the
#: engine leaves them out of its candidates' payloads, which it hands over anew at each read.
UNRANKED = ("context", "current", "last_request", "origin_request", "slot_rules", "tells_time")

#: Other wordings a fact keeps (``aliases``): the merge guard lets only restatements in other
#: case, punctuation, inflection or filler merge, so a few show every way it was put.
ALIASES_KEPT = 16

_SPACE = re.compile(r"\s+")
_TRAILING = ".!;,"


@dataclass(frozen=True, kw_only=True)
class FactPolicy:
    """The service's limits and tuning (built from its settings)."""

    near_duplicate_threshold: float = 0.92
    reinforce_rate: float = 0.2
    default_importance: float = 0.5
    default_confidence: float = 0.7
    default_ttl_seconds: float | None = None
    max_content_chars: int = 4000
    max_batch: int = 256
    max_facts_per_scope: int = 100_000
    max_facts_per_collection: int | None = 1_000_000
    max_top_k: int = 100
    max_list_limit: int = 1000
    consolidation_similarity: float = 0.85
    consolidation_importance: float = IMPORTANCE_THRESHOLD
    #: One threshold for facts: they are stored at importance 0.5 by default, which seed
    #: 002's ``min_importance`` (0.5, "below") would leave out of every pass.
    consolidation_min_importance: float | None = None
    consolidation_max_candidates: int = 10_000
    consolidation_history_ttl: float | None = None
    supersede_by_rule: bool = True
    #: Embed each sentence of a fact of two or more beside the fact, for ranking
    #: (:mod:`memory_services.store.sentences`).
    sentence_vectors: bool = True
    #: How: "separate", each sentence embedded alone with the label; "late", pooled from
    #: the fact's own model run (late chunking), "late-label" with the label's tokens too.
    sentence_pooling: SentencePooling = "separate"


def normalise(content: str) -> str:
    """Compatibility-normalised, case-folded, whitespace collapsed, trailing stops dropped."""
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", content).casefold()).strip()
    return text.rstrip(_TRAILING).rstrip()


def content_hash(normalised: str) -> str:
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def identity(scope: Scope) -> Scope:
    """The scope that owns a fact: the request's, without the conversation."""
    return scope.owner()


def fact_id(scope: Scope, normalised: str) -> str:
    key = "\x1f".join((scope.workspace, scope.collection, scope.user or "", normalised))
    return str(uuid.uuid5(FACT_NAMESPACE, key))


def live(now: float) -> list[Condition]:
    """Current (not superseded) and unexpired facts."""
    return [Condition(key="current", equals=True), *unexpired(now)]


def unexpired(now: float) -> list[Condition]:
    return [Condition(key="expires_at", gt=now)]


def expiry(now: float, ttl_seconds: float | None) -> float:
    return NEVER if ttl_seconds is None else now + ttl_seconds


def new_payload(
    scope: Scope,
    *,
    content: str,
    normalised: str,
    now: float,
    importance: float,
    confidence: float,
    expires_at: float,
    metadata: Mapping[str, str],
    source_conversation: str | None,
    request_id: str | None,
    supersedes: str | None = None,
) -> dict[str, Any]:
    owner = scope.with_conversation(source_conversation)
    return owner.payload() | {
        "content": content,
        "content_hash": content_hash(normalised),
        "created_at": now,
        "updated_at": now,
        "last_accessed": None,
        "access_count": 0,
        "importance": importance,
        "confidence": confidence,
        "expires_at": expires_at,
        "supersedes": supersedes,
        "superseded_by": None,
        "current": True,
        "metadata": dict(metadata),
        # Says when, relative to when told ("last week", "for two years"): for "when" questions.
        "tells_time": when.tells_time(content),
        # Redelivery guard: the request that created / last reinforced this record.
        "origin_request": request_id,
        "last_request": request_id,
    }


def reinforced(
    payload: Mapping[str, Any],
    *,
    now: float,
    rate: float,
    importance: float | None,
    confidence: float | None,
    expires_at: float,
    request_id: str | None,
) -> dict[str, Any]:
    """The fields a restated fact changes: one more access, confidence moved ``rate`` of
    the way towards 1 (or up to the restatement's own, if higher), the higher importance,
    the later expiry."""
    held = float(payload["confidence"])
    return {
        "access_count": int(payload["access_count"]) + 1,
        "confidence": min(1.0, max(held + (1.0 - held) * rate, confidence or 0.0)),
        "importance": max(float(payload["importance"]), importance or 0.0),
        "expires_at": max(float(payload["expires_at"]), expires_at),
        "updated_at": now,
        "last_request": request_id,
    }


def aliased(payload: Mapping[str, Any], content: str, normalised: str) -> dict[str, Any]:
    """The ``aliases`` change that keeps ``content``, merged into the fact ``payload`` as a
    near-duplicate, recoverable; nothing if the fact already holds that wording."""
    aliases = list(payload.get("aliases") or [])
    held = {normalise(text) for text in (payload["content"], *aliases)}
    if normalised in held or len(aliases) >= ALIASES_KEPT:
        return {}
    return {"aliases": [*aliases, content]}


def to_fact(id: str, payload: Mapping[str, Any], score: float | None = None) -> Fact:
    expires_at = float(payload["expires_at"])
    return Fact(
        id=id,
        content=payload["content"],
        workspace=payload["scope_workspace"],
        collection=payload["scope_collection"],
        user=payload.get("scope_user"),
        source_conversation=payload.get("scope_conversation"),
        created_at=payload["created_at"],
        updated_at=payload["updated_at"],
        last_accessed=payload.get("last_accessed"),
        access_count=payload["access_count"],
        importance=payload["importance"],
        confidence=payload["confidence"],
        expires_at=None if expires_at >= NEVER else expires_at,
        supersedes=payload.get("supersedes"),
        superseded_by=payload.get("superseded_by"),
        content_hash=payload["content_hash"],
        metadata=payload.get("metadata") or {},
        valid_at=payload.get("valid_at"),
        valid_until=payload.get("valid_until"),
        conflicts_with=payload.get("conflicts_with") or [],
        score=score,
        sources=payload.get("sources") or [],
        aliases=payload.get("aliases") or [],
        consolidated_from=payload.get("consolidated_from") or [],
        consolidated_into=payload.get("consolidated_into"),
        consolidation_id=payload.get("consolidation_id") or _last(payload.get("consolidations")),
    )


def _last(values: list[str] | None) -> str | None:
    return values[-1] if values else None
