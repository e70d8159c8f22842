"""Writing facts: store (dedup, reinforce, quota) and update (supersede, keep history).

Callers hold the service's write lock, so the checks here and the writes that follow them
cannot interleave with another write. Every check runs before the first write: a request
that fails validation or the quota writes nothing. A near-duplicate by embedding reinforces
a fact only when :mod:`memory_services.dedup_guard` agrees that the texts state the same
thing; the fact then keeps the new wording among its ``aliases``. Redelivery is harmless:
ids are derived from scope and content, and a record remembers the last request that
reinforced it.

A request marked ``sequence`` (consecutive turns of a conversation, in order) is stored as
one: each new record keeps the request's ``thread`` and its place in it (``seq``), so a
search lifts the neighbours of its hits (:mod:`memory_services.store.ties`). Facts stored
together without it are unrelated as far as ranking goes.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_services import dedup_guard, when
from memory_services.dedup_guard import may_merge
from memory_services.facts import changes, slots
from memory_services.facts import records as rec
from memory_services.facts.context import FactContext, fact_ids
from memory_services.facts.quota import check_quota
from memory_services.store.base import Hit, Record, Scope
from react_mem.errors import BadRequest
from react_mem.schema.facts import FactInput, StoredFact


@dataclass
class _Item:
    content: str
    normalised: str
    id: str
    fact: FactInput
    #: Its place among the request's facts.
    seq: int = 0


@dataclass
class _Batch:
    """Planned writes: new records, and the merged payload changes of existing ones."""

    new: dict[str, Record] = field(default_factory=dict)
    changed: dict[str, dict[str, Any]] = field(default_factory=dict)
    payloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The vectors of ``new``, in its order, for near-duplicate checks within the batch.
    new_vectors: list[np.ndarray] = field(default_factory=list)

    def add(self, record: Record) -> None:
        self.new[record.id] = record
        self.new_vectors.append(np.asarray(record.vector, dtype=np.float32))


def _item(ctx: FactContext, scope: Scope, fact: FactInput, seq: int) -> _Item:
    where = f"facts[{seq}]"
    content = ctx.content(fact.content, f"{where}.content")
    ctx.metadata(fact.metadata, f"{where}.metadata")
    normalised = rec.normalise(content)
    if not normalised:
        raise BadRequest(f"{where}.content has no words", type="bad-content")
    fact_ids(fact.updates, 16, f"{where}.updates")  # checked before anything is written
    fact_ids(fact.contradicts, 16, f"{where}.contradicts")
    return _Item(content, normalised, rec.fact_id(scope, normalised), fact, seq)


@dataclass(frozen=True)
class Prepared:
    """A store request checked and embedded: what needs no lock, so one request's
    embedding runs while another's writes do."""

    items: list[_Item]
    #: Each distinct content's vector.
    vectors: dict[str, list[float]]
    #: What each distinct content's record keeps of its sentences' vectors (if anything).
    sentences: dict[str, dict[str, str]] = field(default_factory=dict)


def check_sizes(ctx: FactContext, facts: list[FactInput]) -> None:
    """Refuse a ``store`` over the batch or size limits: cheap, so the service runs it
    before the PII screen, which would read every text of an oversized request first."""
    if not facts:
        raise BadRequest("store needs at least one fact in 'facts'")
    if len(facts) > ctx.policy.max_batch:
        raise BadRequest(
            f"facts: {len(facts)} in one request; at most {ctx.policy.max_batch}",
            type="too-large",
        )
    for n, fact in enumerate(facts):
        ctx.content(fact.content, f"facts[{n}].content")
        ctx.metadata(fact.metadata, f"facts[{n}].metadata")


async def prepare(ctx: FactContext, scope: Scope, facts: list[FactInput]) -> Prepared:
    """Check ``facts`` (a bad one refuses the request before anything is embedded) and
    embed their distinct contents."""
    check_sizes(ctx, facts)
    owner = rec.identity(scope)
    items = [_item(ctx, owner, fact, n) for n, fact in enumerate(facts)]
    texts = list(dict.fromkeys(item.content for item in items))
    vectors, parts = await ctx.embed_facts(texts)
    await read_texts(texts)
    return Prepared(
        items, dict(zip(texts, vectors, strict=True)), dict(zip(texts, parts, strict=True))
    )


async def read_texts(texts: list[str]) -> None:
    """Read each text before the write lock is taken (the readings are kept by text): a
    maximum batch's reading (~11 ms a 4,000-character text) held the lock, and every other
    write of the service behind it, for seconds. Yields between texts."""
    for text in texts:
        await asyncio.sleep(0)
        dedup_guard.read(text)
        when.tells_time(text)
        slots.read(text)


async def store(
    ctx: FactContext,
    scope: Scope,
    prepared: Prepared,
    request_id: str | None,
    *,
    evict: bool = False,
    sequence: bool = False,
) -> tuple[list[StoredFact], list[str]]:
    """What became of each fact, and the ids evicted to make room (``evict``; see
    :mod:`.quota`); with ``sequence``, new records keep their place in the request. Run
    under the service's write lock."""
    policy = ctx.policy
    owner = rec.identity(scope)
    items = prepared.items
    now = ctx.clock()
    found = {r.id: r for r in await ctx.get(sorted({i.id for i in items}), owner)}
    live = {i: r.payload for i, r in found.items() if float(r.payload["expires_at"]) > now}
    fresh = [item for item in items if item.id not in live]
    vectors = {item.content: prepared.vectors[item.content] for item in fresh}
    stored = await _stored_near_duplicates(ctx, owner, vectors, now)
    batch = _Batch(payloads={i: dict(p) for i, p in live.items()})
    #: The request's sequence (a redelivery keeps it); a lone fact has no neighbours.
    thread = (request_id or uuid.uuid4().hex) if sequence and len(items) > 1 else None
    results = []
    for item in items:
        # Each fact's planning is CPU work on the event loop (near-duplicate reading):
        # yield between facts, so a maximum batch never holds the process's other
        # requests and services for its whole length.
        await asyncio.sleep(0)
        expires_at = rec.expiry(now, item.fact.ttl_seconds or ctx.default_ttl(owner.workspace))
        if item.id in batch.payloads and _revives(item.fact, batch.payloads[item.id]):
            revived: dict[str, Any] = {"current": True, "superseded_by": None, "valid_until": None}
            revived |= {"valid_at": item.fact.valid_at, "updated_at": now}
            batch.payloads[item.id].update(revived)
            batch.changed.setdefault(item.id, {}).update(revived)
            target, similarity = item.id, 1.0
        elif item.id in batch.payloads and not batch.payloads[item.id]["current"]:
            merged_into = await _merged_into(ctx, owner, batch, item.id, now)
            if merged_into is None:
                # History: a stale restatement must not undo an update (``update`` can).
                results.append(StoredFact(id=item.id, status="superseded", similarity=1.0))
                continue
            target, similarity = merged_into, None  # a consolidated fact: its survivor
        elif item.id in batch.payloads:
            target, similarity = item.id, 1.0
        else:
            vector = vectors[item.content]
            match = _near_duplicate(ctx, batch, item.content, vector, stored[item.content])
            if match is None:
                payload = _new(ctx, owner, item, now, expires_at, request_id, scope)
                payload |= prepared.sentences.get(item.content, {})
                if thread is not None:
                    payload |= {"thread": thread, "seq": item.seq}
                batch.payloads[item.id] = payload
                batch.add(Record(item.id, payload, vector))
                results.append(StoredFact(id=item.id, status="added"))
                continue
            target, similarity = match
        payload = batch.payloads[target]
        if request_id is None or payload.get("last_request") != request_id:
            reinforced = rec.reinforced(
                payload,
                now=now,
                rate=policy.reinforce_rate,
                importance=item.fact.importance,
                confidence=item.fact.confidence,
                expires_at=expires_at,
                request_id=request_id,
            )
            if target != item.id:
                reinforced |= rec.aliased(payload, item.content, item.normalised)
            payload.update(reinforced)
            if target not in batch.new:
                batch.changed.setdefault(target, {}).update(reinforced)
        added_here = request_id is not None and payload.get("origin_request") == request_id
        if target in batch.new or added_here:  # added by this request (maybe redelivered)
            own = target == item.id
            results.append(
                StoredFact(id=target, status="added", similarity=None if own else similarity)
            )
        else:
            results.append(StoredFact(id=target, status="reinforced", similarity=similarity))
    up_to = max((float(r.payload["importance"]) for r in batch.new.values()), default=0.0)
    evicted = await check_quota(
        ctx, owner, len(batch.new), now, evict_up_to=up_to if evict else None, keep=batch.payloads
    )
    await ctx.scopes.remember(owner)
    if evicted:
        await ctx.delete(owner, ids=evicted)
        ctx.on_change(-len(evicted))
    if batch.new:
        await ctx.upsert(list(batch.new.values()))
        ctx.on_change(len(batch.new))
    for id, changed in batch.changed.items():
        await ctx.set_payload(id, changed, owner)
    told = {
        r.id: changes.Told(fact_ids(i.fact.updates, 16), fact_ids(i.fact.contradicts, 16))
        for i, r in zip(items, results, strict=True)
        if i.fact.updates or i.fact.contradicts
    }
    ids = [r.id for r in results]
    outcome = await changes.settle(ctx, owner, ids, now, told, by_rule=policy.supersede_by_rule)
    results = [
        r.model_copy(
            update={
                "superseded": outcome.superseded.get(r.id, []),
                "conflicts_with": outcome.conflicts.get(r.id, []),
            }
        )
        for r in results
    ]
    return results, evicted


async def _merged_into(
    ctx: FactContext, owner: Scope, batch: _Batch, id: str, now: float
) -> str | None:
    """The live fact a consolidated fact ``id`` was merged into, following later merges;
    None if ``id`` was superseded by an update, or its survivor is gone or history."""
    seen = {id}
    while (into := batch.payloads[id].get("consolidated_into")) and into not in seen:
        seen.add(into)
        if into not in batch.payloads:
            found = await ctx.get([into], owner)
            if not found or float(found[0].payload["expires_at"]) <= now:
                return None
            batch.payloads[into] = dict(found[0].payload)
        if batch.payloads[into]["current"]:
            return str(into)
        id = into
    return None


def _new(
    ctx: FactContext,
    owner: Scope,
    item: _Item,
    now: float,
    expires_at: float,
    request_id: str | None,
    scope: Scope,
) -> dict[str, Any]:
    policy = ctx.policy
    payload = rec.new_payload(
        owner,
        content=item.content,
        normalised=item.normalised,
        now=now,
        importance=_or(item.fact.importance, policy.default_importance),
        confidence=_or(item.fact.confidence, policy.default_confidence),
        expires_at=expires_at,
        metadata=item.fact.metadata,
        source_conversation=item.fact.source_conversation or scope.conversation,
        request_id=request_id,
    )
    if item.fact.valid_at is not None:
        payload["valid_at"] = item.fact.valid_at
    if item.fact.context:
        payload["context"] = item.fact.context  # indexed for lexical search, not returned
    return payload | changes.slot_of(item.content)


def _revives(fact: FactInput, payload: dict[str, Any]) -> bool:
    """Whether restating a superseded fact makes it current again: only when the
    restatement says it holds from a time after its successor took over ("not allergic any
    more", told again a year after "allergic again"). Without such a time it may be an old
    statement repeated, which must not undo an update."""
    until = payload.get("valid_until")
    return (
        not payload["current"]
        and not payload.get("consolidated_into")
        and fact.valid_at is not None
        and until is not None
        and fact.valid_at > float(until)
    )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


#: Stored near-duplicates fetched per text: the best one the guard refuses may hide another.
CANDIDATES = 5


async def _stored_near_duplicates(
    ctx: FactContext, owner: Scope, vectors: dict[str, list[float]], now: float
) -> dict[str, list[Hit]]:
    """Each text's most similar stored live facts at or above the threshold, in one batch."""
    found = await ctx.search_many(
        owner,
        list(vectors.values()),
        limit=CANDIDATES,
        min_score=ctx.policy.near_duplicate_threshold,
        where=rec.live(now),
    )
    return dict(zip(vectors, found, strict=True))


def _near_duplicate(
    ctx: FactContext, batch: _Batch, content: str, vector: list[float], stored: list[Hit]
) -> tuple[str, float] | None:
    """The most similar live fact at or above the threshold that states what ``content``
    does (:func:`may_merge`): one of ``stored``, or new in this batch (the store is not
    written until the whole batch is planned)."""
    threshold = ctx.policy.near_duplicate_threshold
    found = [(hit.score, hit.id, hit.payload) for hit in stored]
    if batch.new:
        sims = np.stack(batch.new_vectors) @ np.asarray(vector, dtype=np.float32)
        for (id, record), sim in zip(batch.new.items(), sims.tolist(), strict=True):
            if sim >= threshold:
                found.append((sim, id, record.payload))
    for score, id, payload in sorted(found, key=lambda f: f[0], reverse=True):
        if may_merge(content, payload["content"]):
            batch.payloads.setdefault(id, dict(payload))
            return id, float(score)
    return None
