"""Updating a fact without overwriting it, and reading the version history.

``update`` writes the new content as a fact of its own that ``supersedes`` the old one; the
old record gets ``superseded_by`` and ``current = False``: ``get`` and ``history`` still
return it, ``retrieve`` and ``list`` no longer do. The caller holds the write lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_services.facts import records as rec
from memory_services.facts.context import FactContext
from memory_services.facts.quota import check_quota
from memory_services.store.base import Record, Scope
from react_mem.errors import BadRequest
from react_mem.schema.facts import Fact, FactInput, StoredFact

MAX_HISTORY = 100


async def live_record(ctx: FactContext, scope: Scope, id: str, now: float) -> Record:
    found = await ctx.get([id], scope)
    if not found or float(found[0].payload["expires_at"]) <= now:
        raise BadRequest(f"no fact {id} in this scope", type="not-found")
    return found[0]


async def update(
    ctx: FactContext, scope: Scope, id: str, new: FactInput, request_id: str | None
) -> StoredFact:
    content = ctx.content(new.content, "fact.content")
    ctx.metadata(new.metadata, "fact.metadata")
    normalised = rec.normalise(content)
    now = ctx.clock()
    old = await live_record(ctx, scope, id, now)
    p = old.payload
    owner = Scope.of_payload(p).owner()
    new_id = rec.fact_id(owner, normalised)
    if new_id == id:
        raise BadRequest(f"update of fact {id} does not change its content", type="unchanged")
    if p.get("superseded_by") == new_id:  # a redelivered update: already done
        return await _done(ctx, owner, new_id, request_id)
    if not p["current"]:
        raise BadRequest(
            f"fact {id} was superseded by {p.get('superseded_by')}; update the current version",
            type="superseded",
        )
    found = await ctx.get([new_id], owner)
    target = found[0] if found and float(found[0].payload["expires_at"]) > now else None
    ttl = new.ttl_seconds
    expires_at = float(p["expires_at"]) if ttl is None else rec.expiry(now, ttl)
    if target is None:
        await check_quota(ctx, owner, 1, now)
        [vector], [parts] = await ctx.embed_facts([content])
        payload = rec.new_payload(
            owner,
            content=content,
            normalised=normalised,
            now=now,
            importance=p["importance"] if new.importance is None else new.importance,
            confidence=p["confidence"] if new.confidence is None else new.confidence,
            expires_at=expires_at,
            metadata=dict(p.get("metadata") or {}) | new.metadata,
            source_conversation=(
                new.source_conversation or scope.conversation or p.get("scope_conversation")
            ),
            request_id=request_id,
            supersedes=id,
        )
        if (valid_at := p.get("valid_at") if new.valid_at is None else new.valid_at) is not None:
            payload["valid_at"] = valid_at
        payload |= parts
        await ctx.upsert([Record(new_id, payload, vector)])
        ctx.on_change(1)
        status = "added"
    else:
        # The new content already exists: that record becomes the successor.
        await ctx.set_payload(new_id, _successor(target.payload, id, now, request_id), owner)
        status = "reinforced"
    successor = await ctx.get([new_id], owner)
    until = successor[0].payload.get("valid_at") if successor else None
    changes = {"current": False, "superseded_by": new_id, "updated_at": now}
    await ctx.set_payload(id, changes | {"valid_until": now if until is None else until}, owner)
    return StoredFact(id=new_id, status=status, similarity=None if target is None else 1.0)


async def _done(ctx: FactContext, owner: Scope, new_id: str, request_id: str | None) -> StoredFact:
    """The reply the first delivery of this update gave."""
    found = await ctx.get([new_id], owner)
    added = bool(found) and request_id is not None
    added = added and found[0].payload.get("origin_request") == request_id
    return StoredFact(
        id=new_id, status="added" if added else "reinforced", similarity=None if added else 1.0
    )


def _successor(
    payload: Mapping[str, Any], old_id: str, now: float, request_id: str | None
) -> dict[str, Any]:
    changes: dict[str, Any] = {"current": True, "superseded_by": None, "updated_at": now}
    if payload.get("consolidated_into"):  # a consolidated fact is live again, not absorbed
        changes |= {"consolidated_into": None, "consolidation_id": None}
    if not payload["current"] or not payload.get("supersedes"):
        changes["supersedes"] = old_id
    if request_id is None or payload.get("last_request") != request_id:
        changes |= {
            "access_count": int(payload["access_count"]) + 1,
            "last_request": request_id,
        }
    return changes


async def history(ctx: FactContext, scope: Scope, id: str) -> list[Fact]:
    """Every version of fact ``id`` still held, oldest first (a deleted or expired version
    ends the chain)."""
    now = ctx.clock()
    start = await live_record(ctx, scope, id, now)
    p = start.payload
    owner = Scope.of_payload(p).owner()
    seen = {start.id}
    older = await _walk(ctx, owner, start, "supersedes", seen, now)
    newer = await _walk(ctx, owner, start, "superseded_by", seen, now)
    return [rec.to_fact(r.id, r.payload) for r in (*reversed(older), start, *newer)]


async def _walk(
    ctx: FactContext, owner: Scope, start: Record, link: str, seen: set[str], now: float
) -> list[Record]:
    chain, record = [], start
    while (next_id := record.payload.get(link)) and next_id not in seen:
        if len(seen) >= MAX_HISTORY:
            break
        found = await ctx.get([next_id], owner)
        if not found or float(found[0].payload["expires_at"]) <= now:
            break
        record = found[0]
        seen.add(record.id)
        chain.append(record)
    return chain
