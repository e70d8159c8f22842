"""Scope filters for the Qdrant server: the scope's keys, then the conditions, all must hold."""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client import models

from memory_services.store import checks
from memory_services.store.base import Condition, Scope, require_scope


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
    scope: Scope, where: Sequence[Condition] = (), ids: Sequence[str] | None = None
) -> models.Filter:
    """The scope's keys, then ``where``, then (optionally) an id set: all must hold."""
    must: list[models.Condition] = [
        models.FieldCondition(key=key, match=models.MatchValue(value=value))
        for key, value in require_scope(scope).payload().items()
    ]
    must_not: list[models.Condition] = []
    for cond in where:
        yes, no = _condition(cond)
        must += yes
        must_not += no
    if ids is not None:
        must.append(models.HasIdCondition(has_id=list(ids)))
    return models.Filter(must=must, must_not=must_not or None)
