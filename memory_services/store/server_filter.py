"""Scope filters for the Qdrant server: the scope's keys, then the conditions, all must hold.

A scope without a user matches only records without ``scope_user`` (is-empty), never
another user's: see :mod:`react_mem.schema.scope` for the ownership rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client import models

from memory_services.store import checks
from memory_services.store.base import SCOPE_KEYS, Condition, StoreScope, scope_matches

SCOPE_USER = SCOPE_KEYS[2]


def _condition(cond: Condition) -> tuple[list[models.Condition], list[models.Condition]]:
    """(must, must_not) clauses for one condition."""
    checks.condition(cond)
    if cond.missing is not None:
        empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=cond.key))
        return ([empty], []) if cond.missing else ([], [empty])
    if cond.equals is not None:
        match: models.Match = models.MatchValue(value=cond.equals)
    elif cond.any_of is not None:
        match = models.MatchAny(any=list(cond.any_of))
    else:
        rng = models.Range(gt=cond.gt, gte=cond.gte, lt=cond.lt, lte=cond.lte)
        return [models.FieldCondition(key=cond.key, range=rng)], []
    return [models.FieldCondition(key=cond.key, match=match)], []


def scope_filter(
    scope: StoreScope, where: Sequence[Condition] = (), ids: Sequence[str] | None = None
) -> models.Filter:
    """The scope's keys (a user-less scope: no ``scope_user``), then ``where``, then
    (optionally) an id set: all must hold."""
    keys, no_user = scope_matches(scope)
    must: list[models.Condition] = [
        models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in keys.items()
    ]
    if no_user:
        must.append(models.IsEmptyCondition(is_empty=models.PayloadField(key=SCOPE_USER)))
    must_not: list[models.Condition] = []
    for cond in where:
        yes, no = _condition(cond)
        must += yes
        must_not += no
    if ids is not None:
        must.append(models.HasIdCondition(has_id=list(ids)))
    return models.Filter(must=must, must_not=must_not or None)
