"""Recall of what held at a past time: facts that updates superseded, for questions about it.

A question that names a past time ("where did I live in 2023?") or asks about before
("used to", "previously", "before I moved") also searches the facts updates made history
(those with a ``valid_until``, see :mod:`.changes`), of the slot it asks about when the rules
read one (:func:`.slots.asked`). A fact held from its ``valid_at`` (else when it was stored)
until its ``valid_until``; see :func:`merge` for the order. Default recall never sees them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memory_services.facts.changes import when as since
from memory_services.store.base import Condition, Hit

_BEFORE = re.compile(
    r"\b(used to|before|previously|formerly|earlier|originally|at first|at the time|back then|"
    r"in the past|any more|anymore|no longer|did i|was i|were you|was my|were my|had i|"
    r"did the user|was the user)\b",
    re.I,
)


def asked(query: str, named: tuple[float, float] | None, now: float) -> tuple[float, float] | None:
    """The past time ``query`` asks about (``(0, now)`` for "before" with no time named), or
    None when it asks about the present; ``named``: the time it names
    (:func:`memory_services.when.parse`)."""
    if named is not None and named[0] < now:
        return named
    return (0.0, now) if _BEFORE.search(query) else None


def history_filter(span: tuple[float, float], key: str | None) -> list[Condition]:
    """Superseded facts that held after ``span`` began, of the slot ``key`` when the
    question names one (the caller adds expiry and scope)."""
    where = [Condition(key="current", equals=False), Condition(key="valid_until", gt=span[0])]
    return where if key is None else [*where, Condition(key="slot", equals=key)]


def held(payload: Mapping[str, Any], span: tuple[float, float]) -> bool:
    """Whether the fact held at some time within ``span``."""
    until = payload.get("valid_until")
    return since(payload) < span[1] and (until is None or float(until) > span[0])


def merge(
    current: list[Hit],
    earlier: list[Hit],
    span: tuple[float, float],
    top_k: int,
    key: str | None = None,
) -> list[Hit]:
    """The current hits and the earlier values in one list. With a time named, what held
    then comes first: of the asked slot ``key``, the value that held longest within the time
    first; with no slot known, the earlier values in the search's order. With no time named
    ("before", ``span[0] == 0``), the current value first and the earlier ones, newest
    first, after it (up to half of ``top_k`` when no slot is known)."""
    earlier = [h for h in earlier if held(h.payload, span)]
    if key is None:
        if span[0] == 0.0:
            room = min(max(1, top_k // 2), len(earlier))
            return [*current[: top_k - room], *earlier][:top_k]
        return [*earlier, *current][:top_k]
    same = [h for h in current if h.payload.get("slot") == key]
    if span[0] == 0.0:
        first = [*same, *sorted(earlier, key=lambda h: -since(h.payload))]
    else:
        first = [h for h in [*earlier, *same] if held(h.payload, span)]
        first.sort(key=lambda h: -_overlap(h.payload, span))  # what held longest then first
    chosen = {h.id for h in first}
    return [*first, *(h for h in current if h.id not in chosen)][:top_k]


def _overlap(payload: Mapping[str, Any], span: tuple[float, float]) -> float:
    until = payload.get("valid_until")
    end = span[1] if until is None else min(span[1], float(until))
    return end - max(span[0], since(payload))
