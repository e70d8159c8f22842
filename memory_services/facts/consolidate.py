"""Fact consolidation: the fact-specific rules of a pass (see :mod:`.schema` for the contract
and :mod:`memory_services.consolidation.engine` for the pass itself).

An absorbed fact becomes history the way an updated one does (``current`` false,
``superseded_by`` its survivor), so ``retrieve``, ``list`` and the near-duplicate check skip
it and ``history`` walks from it to the survivor.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from memory_services.consolidation.engine import undo_fields
from memory_services.dedup_guard import may_merge
from memory_services.facts import records as rec
from memory_services.store.base import Condition, Record


class FactKind:
    name = "fact"
    importance_key = "importance"

    def __init__(self, *, max_metadata_chars: int, history_ttl: float | None = None) -> None:
        self._max_metadata = max_metadata_chars
        self._history_ttl = history_ttl

    def live(self, now: float) -> list[Condition]:
        return rec.live(now)

    def held(self, payload: Mapping[str, Any], now: float) -> bool:
        return float(payload["expires_at"]) > now

    def group(self, payload: Mapping[str, Any]) -> Hashable:
        return payload.get("scope_user")  # one user's facts never merge with another's

    def rank(self, record: Record) -> tuple[Any, ...]:
        p = record.payload
        return (
            float(p["importance"]),
            float(p["confidence"]),
            int(p["access_count"]),
            float(p["created_at"]),
        )

    def may_merge(self, survivor: Mapping[str, Any], member: Mapping[str, Any]) -> bool:
        return may_merge(survivor["content"], member["content"])  # the survivor's text stays

    def size(self, payload: Mapping[str, Any]) -> int:
        metadata = payload.get("metadata") or {}
        parts = [payload["content"], *metadata, *metadata.values(), *(payload.get("sources") or [])]
        return sum(len(part.encode("utf-8")) for part in parts)

    def merge(
        self, survivor: Mapping[str, Any], absorbed: Sequence[Mapping[str, Any]], now: float
    ) -> dict[str, Any]:
        members = [survivor, *absorbed]
        accessed = [m["last_accessed"] for m in members if m.get("last_accessed") is not None]
        return {
            "access_count": sum(int(m["access_count"]) for m in members),
            "importance": max(float(m["importance"]) for m in members),
            "confidence": max(float(m["confidence"]) for m in members),
            "last_accessed": max(accessed) if accessed else None,
            "expires_at": max(float(m["expires_at"]) for m in members),
            "metadata": self._metadata(members),
            "sources": _sources(survivor, absorbed),
            "updated_at": now,
        }

    def absorb(self, payload: Mapping[str, Any], survivor_id: str, now: float) -> dict[str, Any]:
        changes: dict[str, Any] = {
            "current": False,
            "superseded_by": survivor_id,
            "updated_at": now,
        }
        if self._history_ttl is not None:
            changes["expires_at"] = min(float(payload["expires_at"]), now + self._history_ttl)
        return changes

    def restore(
        self, current: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> dict[str, Any]:
        return undo_fields(current, before, after, counters=("access_count",))

    def _metadata(self, members: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        """The survivor's metadata, then keys it lacks from the others (best first), while
        the whole stays within the per-fact limit."""
        merged: dict[str, str] = dict(members[0].get("metadata") or {})
        size = sum(len(k) + len(v) for k, v in merged.items())
        for member in members[1:]:
            for key, value in (member.get("metadata") or {}).items():
                if key not in merged and size + len(key) + len(value) <= self._max_metadata:
                    merged[key] = value
                    size += len(key) + len(value)
        return merged


def _sources(survivor: Mapping[str, Any], absorbed: Sequence[Mapping[str, Any]]) -> list[str]:
    """Conversations the absorbed facts came from, besides the survivor's own."""
    own = survivor.get("scope_conversation")
    found = list(survivor.get("sources") or [])
    for payload in absorbed:
        found += [payload.get("scope_conversation"), *(payload.get("sources") or [])]
    return [c for c in dict.fromkeys(found) if c and c != own]
