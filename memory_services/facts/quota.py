"""Fact quotas: per user (``max_facts_per_scope``) and per collection across all its users
(``max_facts_per_collection``), so inventing user ids does not escape the first.

Both count records, history included, that have not expired. At the per-user quota a
``store`` that asks for it (``evict``) makes room by the retention rule: history first
(superseded or merged versions), then the least important, then the least recently used
(last access, else creation), then the oldest. It never evicts a record more important
than the most important fact being added, nor one the same request reinforces. The
collection quota is never made room for: the other users' facts are not this user's to
drop, so a store there is refused (``quota-exceeded``).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping
from typing import Any

from memory_services.facts import records as rec
from memory_services.facts.context import FactContext
from memory_services.store.base import AllOwners, Condition, Scope
from react_mem.errors import BadRequest

#: Records read per page while looking for what to evict.
_PAGE = 1000


class FactQuotaExceeded(BadRequest):
    """Refused at a quota; ``quota`` says which: ``user`` or ``collection``."""

    def __init__(self, message: str, *, quota: str) -> None:
        super().__init__(message, type="quota-exceeded")
        self.quota = quota


async def check_quota(
    ctx: FactContext,
    owner: Scope,
    adding: int,
    now: float,
    *,
    evict_up_to: float | None = None,
    keep: Collection[str] = (),
) -> list[str]:
    """Check both quotas before ``adding`` records to ``owner``. With ``evict_up_to`` (the
    highest importance that may be evicted) return the ids to delete so the user's quota
    holds; else, or without enough such records, raise ``quota-exceeded``."""
    if adding == 0:
        return []
    held = await ctx.count(owner, rec.unexpired(now))
    limit = ctx.policy.max_facts_per_scope
    evicted: list[str] = []
    if held + adding > limit:
        need = held + adding - limit
        if evict_up_to is not None:
            evicted = await _victims(ctx, owner, now, need, evict_up_to, keep)
        if len(evicted) < need:
            who = f"user {owner.user!r} in " if owner.user else ""
            raise FactQuotaExceeded(
                f"quota exceeded: {who}collection {owner.collection!r} holds {held} facts "
                f"(history included) of at most {limit}; storing {adding} more would exceed it. "
                f"Delete or purge facts first.",
                quota="user",
            )
    cap = ctx.policy.max_facts_per_collection
    if cap is not None:
        everyone = AllOwners(owner.workspace, owner.collection)  # counted, never read
        total = await ctx.count(everyone, rec.unexpired(now))
        if total - len(evicted) + adding > cap:
            raise FactQuotaExceeded(
                f"quota exceeded: collection {owner.collection!r} holds {total} facts of all "
                f"its users (history included) of at most {cap}; storing {adding} more would "
                f"exceed it.",
                quota="collection",
            )
    return evicted


async def _victims(
    ctx: FactContext,
    owner: Scope,
    now: float,
    need: int,
    up_to: float,
    keep: Collection[str],
) -> list[str]:
    """The ``need`` records of ``owner`` that the retention rule gives up first (fewer
    when there are not that many it may evict). One pass over the candidates."""
    where = [*rec.unexpired(now), Condition(key="importance", lte=up_to)]
    chosen: list[tuple[Any, ...]] = []  # a max-heap of the ``need`` lowest keys, negated
    cursor: str | None = None
    while True:
        page, cursor = await ctx.scroll(owner, where, _PAGE, cursor)
        for record in page:
            if record.id in keep:
                continue
            key = _retention_key(record.payload)
            entry = (tuple(-k for k in key), record.id)
            if len(chosen) < need:
                heapq.heappush(chosen, entry)
            elif entry > chosen[0]:
                heapq.heapreplace(chosen, entry)
        if cursor is None:
            break
    return [id for _, id in sorted(chosen, reverse=True)]


def _retention_key(payload: Mapping[str, Any]) -> tuple[float, ...]:
    """Lower goes first: history, then importance, then last use, then age."""
    used = payload.get("last_accessed") or payload["created_at"]
    return (
        1.0 if payload["current"] else 0.0,
        float(payload["importance"]),
        float(used),
        float(payload["created_at"]),
    )
