"""Episode consolidation: the episode-specific rules of a pass (see :mod:`.schema` for the
contract and :mod:`memory_services.consolidation.engine` for the pass itself).

An episode's importance is its ``score``. Episodes merge only with others of the same user
and outcome: a failure's lessons are not folded into a success. The survivor keeps its
vector (its goal and own lessons), so unconsolidate needs no embedding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from memory_services.episodes.records import canonical_size, normalise_text
from memory_services.store.base import Condition, Record

#: The payload key listing the lessons merges added to a survivor (kept on a re-store).
MERGED = "merged_lessons"


class EpisodeKind:
    name = "episode"
    importance_key = "score"

    def __init__(self, *, max_lessons: int, oldest_kept: Callable[[], float]) -> None:
        self._max_lessons = max_lessons
        self._oldest_kept = oldest_kept

    def live(self, now: float) -> list[Condition]:
        live = [Condition("consolidated_into", missing=True)]
        oldest = self._oldest_kept()
        return live if math.isinf(oldest) else [*live, Condition("created_at", gte=oldest)]

    def held(self, payload: Mapping[str, Any], now: float) -> bool:
        return float(payload.get("created_at", 0)) >= self._oldest_kept()

    def group(self, payload: Mapping[str, Any]) -> Hashable:
        return (payload.get("scope_user"), payload.get("outcome"))

    def rank(self, record: Record) -> tuple[Any, ...]:
        p = record.payload
        return (float(p["score"]), len(p.get("lessons") or []), float(p["created_at"]))

    def may_merge(self, survivor: Mapping[str, Any], member: Mapping[str, Any]) -> bool:
        # No text guard: a merge loses no text (the lessons are unioned, the absorbed episode
        # keeps its goal and steps, readable by ``get``), and alike goals that differ in a
        # number ("100" / "one hundred euros") teach the same lessons.
        return True

    def size(self, payload: Mapping[str, Any]) -> int:
        return canonical_size(payload)

    def merge(
        self, survivor: Mapping[str, Any], absorbed: Sequence[Mapping[str, Any]], now: float
    ) -> dict[str, Any]:
        lessons = list(survivor.get("lessons") or [])
        seen = {normalise_text(lesson) for lesson in lessons}
        added: list[str] = []
        for payload in absorbed:
            for lesson in payload.get("lessons") or []:
                key = normalise_text(lesson)
                if key not in seen and len(lessons) + len(added) < self._max_lessons:
                    seen.add(key)
                    added.append(lesson)
        return {"lessons": lessons + added, MERGED: [*(survivor.get(MERGED) or []), *added]}

    def absorb(self, payload: Mapping[str, Any], survivor_id: str, now: float) -> dict[str, Any]:
        return {}  # the lineage markers alone take it out of retrieve and list

    def restore(
        self, current: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> dict[str, Any]:
        if "lessons" not in after:
            return {}
        # What this merge added and is still only there by merging (a re-store may have
        # made one the episode's own lesson).
        added = set(after["lessons"]) - set(before["lessons"] or [])
        added &= set(current.get(MERGED) or [])
        return {
            key: [lesson for lesson in current.get(key) or [] if lesson not in added]
            for key in ("lessons", MERGED)
        }


def keep_lineage(old: Mapping[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A survivor stored again (its session went on) keeps its lineage and merged lessons."""
    if not old or not old.get("consolidations"):
        return new
    own = {normalise_text(lesson) for lesson in new["lessons"]}
    merged = [m for m in old.get(MERGED) or [] if normalise_text(m) not in own]
    return new | {
        "lessons": [*new["lessons"], *merged],
        MERGED: merged,
        "consolidated_from": list(old.get("consolidated_from") or []),
        "consolidations": list(old["consolidations"]),
    }
