"""Recall of what held at a past time: facts that updates superseded, for questions about it.

A question that names a past time ("where did I live in 2023?") or asks about before
("used to", "previously", "before I moved") also searches the facts updates made history
(those with a ``valid_until``, see :mod:`.changes`). A fact held from its ``valid_at`` (else
when it was stored) until its ``valid_until``; those holding during the named time come
first, ahead of the current facts that did not hold then; with no time named, the earlier
values follow the current ones. Default recall never sees them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memory_services import when
from memory_services.facts.changes import when as since
from memory_services.store.base import Condition, Hit

_BEFORE = re.compile(
    r"\b(used to|before|previously|formerly|earlier|originally|at first|at the time|back then|"
    r"in the past|any more|anymore|no longer|did i|was i|were you|was my|were my|had i|"
    r"did the user|was the user)\b",
    re.I,
)


def asked(query: str, now: float) -> tuple[float, float] | None:
    """The past time ``query`` asks about (``(0, now)`` for "before" with no time named), or
    None when it asks about the present."""
    named = when.parse(query, now)
    if named is not None and named[0] < now:
        return named
    return (0.0, now) if _BEFORE.search(query) else None


def history_filter(span: tuple[float, float]) -> list[Condition]:
    """Superseded facts that held after ``span`` began (the caller adds expiry and scope)."""
    return [Condition(key="current", equals=False), Condition(key="valid_until", gt=span[0])]


def held(payload: Mapping[str, Any], span: tuple[float, float]) -> bool:
    """Whether the fact held at some time within ``span``."""
    until = payload.get("valid_until")
    return since(payload) < span[1] and (until is None or float(until) > span[0])


def merge(
    current: list[Hit], earlier: list[Hit], span: tuple[float, float], top_k: int
) -> list[Hit]:
    """Facts that held in a named ``span`` first (earlier values and current ones alike, the
    one that held longest within it first), then the others; with no time named
    (``span[0] == 0``), the current facts first and up to half of ``top_k`` earlier values
    after them."""
    earlier = [h for h in earlier if held(h.payload, span)]
    if span[0] == 0.0:
        room = max(1, top_k // 2)
        kept = current[: max(0, top_k - min(room, len(earlier)))]
        return [*kept, *earlier][:top_k]
    first = [h for h in [*earlier, *current] if held(h.payload, span)]
    first.sort(key=lambda h: -_overlap(h.payload, span))  # what held longest then first
    rest = [h for h in current if not held(h.payload, span)]
    return [*first, *rest][:top_k]


def _overlap(payload: Mapping[str, Any], span: tuple[float, float]) -> float:
    until = payload.get("valid_until")
    end = span[1] if until is None else min(span[1], float(until))
    return end - max(span[0], since(payload))
