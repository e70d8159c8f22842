"""Scope filters for Qdrant Edge: the scope's keys, then the conditions, all of which must hold.

A scope without a user matches only records without ``scope_user`` (is-empty), never
another user's: see :mod:`react_mem.schema.scope` for the ownership rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import qdrant_edge as qe

from memory_services.store import checks
from memory_services.store.base import SCOPE_KEYS, Condition, StoreScope, scope_matches

SCOPE_USER = SCOPE_KEYS[2]


def _match_value(value: str | int | bool) -> qe.MatchValue:
    # qdrant-edge-py 0.9.0 turns a Python bool into the integer 1/0, which then matches no
    # boolean payload; numpy.bool_ reaches the engine as a boolean.
    return qe.MatchValue(np.bool_(value) if isinstance(value, bool) else value)  # type: ignore[arg-type]


def _condition(cond: Condition) -> tuple[list[Any], list[Any]]:
    """(must, must_not) clauses for one condition."""
    checks.condition(cond)
    if cond.missing is not None:
        empty = qe.IsEmptyCondition(cond.key)  # absent, null or []
        return ([empty], []) if cond.missing else ([], [empty])
    if cond.equals is not None:
        return [qe.FieldCondition(cond.key, match=_match_value(cond.equals))], []
    if cond.any_of is not None:
        return [qe.FieldCondition(cond.key, match=qe.MatchAny(list(cond.any_of)))], []  # type: ignore[arg-type]
    rng = qe.RangeFloat(gte=cond.gte, gt=cond.gt, lte=cond.lte, lt=cond.lt)
    return [qe.FieldCondition(cond.key, range=rng)], []


def scope_filter(
    scope: StoreScope, where: Sequence[Condition] = (), ids: Sequence[str] | None = None
) -> qe.Filter:
    """The scope's keys (a user-less scope: no ``scope_user``), then ``where``, then
    (optionally) an id set: all must hold."""
    keys, no_user = scope_matches(scope)
    must: list[Any] = [qe.FieldCondition(k, match=qe.MatchValue(v)) for k, v in keys.items()]
    if no_user:
        must.append(qe.IsEmptyCondition(SCOPE_USER))
    must_not: list[Any] = []
    for cond in where:
        yes, no = _condition(cond)
        must += yes
        must_not += no
    if ids is not None:
        must.append(qe.HasIdCondition(set(ids)))
    return qe.Filter(must=must, must_not=must_not or None)
