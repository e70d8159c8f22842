"""A stored fact that a new one updates or contradicts becomes history.

A writer that judged it (an LLM asked by the learner) says so in ``FactInput.updates`` or
``contradicts``, applied first. Then by rule: each fact that fills a slot (:mod:`.slots`:
the user's residence, an allergy, ...) keeps the slot's key in its payload (``slot``,
indexed), and when ``store`` writes one, the live facts of the same owner and slot are read
and compared: the one valid later (``valid_at``, else when it was stored) wins where the two
disagree, and the other is superseded (``current`` false, ``superseded_by``, ``valid_until``
the winner's time): kept in ``history`` and for questions about the past, out of default
recall. When neither can be put first (the same time, and neither says "now" or "any
more"), both stay current and each lists the other in ``conflicts_with``: nothing is
dropped, and the reader sees the dispute. Runs under the service's write lock, after the
request's records are written; a redelivery finds the work done (the loser is no longer
live).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_services.backfill import PAGE
from memory_services.facts import records as rec
from memory_services.facts import slots
from memory_services.facts.context import FactContext
from memory_services.store.base import AllOwners, Condition, Record, Scope, VectorStore

#: Live facts read per slot (an owner's facts about one attribute are few).
PER_SLOT = 64


@dataclass
class Outcome:
    """What one request's facts did to those stored: by the new fact's id."""

    superseded: dict[str, list[str]] = field(default_factory=dict)
    conflicts: dict[str, list[str]] = field(default_factory=dict)


def slot_of(content: str) -> dict[str, Any]:
    """The payload keys a fact with ``content`` gets: ``slot`` (``""`` if no rule reads it:
    present, so the sweep that fills it in for older facts passes over it) and the version of
    the rules that read it (``slot_rules``: a fact an older version could not read is read
    again by the sweep, :func:`reread`)."""
    slot = slots.read(content)
    return {"slot": "" if slot is None else slot.key, "slot_rules": slots.RULES_VERSION}


def reread(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What the sweep writes on a fact that older rules could not read."""
    return slot_of(str(payload.get("content", "")))


#: The facts :func:`reread` is for (with no ``slot_rules``): read by no rule, of an older
#: version.
UNREAD = Condition(key="slot", equals="")


async def reread_older(store: VectorStore, collection: str, scopes: Sequence[AllOwners]) -> int:
    """Read again, by these rules, every fact an older version of them read or left unread
    (``slot_rules`` below :data:`.slots.RULES_VERSION`): its ``slot`` as these rules read it.
    Each page read leaves the condition (its version is written), so the next page is
    fetched from the start. Returns how many were read again."""
    where = [Condition(key="slot_rules", lt=slots.RULES_VERSION)]
    done = 0
    for scope in scopes:
        while True:
            page, _ = await store.scroll(collection, scope=scope, where=where, limit=PAGE)
            if not page:
                break
            by_value: dict[tuple[tuple[str, Any], ...], list[str]] = {}
            for record in page:
                value = tuple(sorted(reread(record.payload).items()))
                by_value.setdefault(value, []).append(record.id)
            for value, ids in by_value.items():
                await store.set_payload(collection, ids, dict(value), scope=scope)
            done += len(page)
    return done


def when(payload: Mapping[str, Any]) -> float:
    """When what a fact says became true, as far as the store knows."""
    valid_at = payload.get("valid_at")
    return float(payload["created_at"] if valid_at is None else valid_at)


@dataclass(frozen=True)
class Told:
    """What a fact's writer judged (``FactInput.updates`` and ``contradicts``)."""

    updates: list[str]
    contradicts: list[str]


async def settle(
    ctx: FactContext,
    owner: Scope,
    ids: Sequence[str],
    now: float,
    told: Mapping[str, Told],
    *,
    by_rule: bool = True,
) -> Outcome:
    """Apply what the writers judged (``told``, by the new fact's id), then compare each fact
    of ``ids`` that fills a slot with the live facts of that slot (``by_rule``)."""
    outcome = Outcome()
    for id, judged in told.items():
        await _judged(ctx, owner, id, judged, outcome, now)
    done: set[str] = set()
    for id in dict.fromkeys(ids) if by_rule else ():
        found = await ctx.get([id], owner)
        if not found or id in done:
            continue
        record = found[0]
        key = record.payload.get("slot")
        if not key or not record.payload["current"]:
            continue
        where = [Condition(key="slot", equals=key), *rec.live(now)]
        page, _ = await ctx.scroll(owner, where, PER_SLOT, None)
        await _against(ctx, owner, record, [r for r in page if r.id != id], outcome, now)
        done.add(id)
    return outcome


async def _judged(
    ctx: FactContext, owner: Scope, id: str, judged: Told, outcome: Outcome, now: float
) -> None:
    """The writer's word: an update keeps the fact valid later current; a contradiction
    marks both. Ids not live in this owner's facts, and pairs the rules read as about
    different things, are passed over."""
    live = {r.id: r for r in await ctx.get([id, *judged.updates, *judged.contradicts], owner)}
    live = {i: r for i, r in live.items() if float(r.payload["expires_at"]) > now}
    new = live.get(id)
    if new is None or not new.payload["current"]:
        return
    for old_id in judged.updates:
        old = live.get(old_id)
        if old is None or old_id == id or not old.payload["current"] or _apart(new, old):
            continue
        if when(old.payload) > when(new.payload):  # told late: the new one is history
            await _supersede(ctx, owner, new, old, now)
            outcome.superseded.setdefault(id, []).append(id)
            return
        await _supersede(ctx, owner, old, new, now)
        outcome.superseded.setdefault(id, []).append(old_id)
    for other in judged.contradicts:
        if other in live and other != id and live[other].payload["current"]:
            if _apart(new, live[other]):
                continue
            await _dispute(ctx, owner, new, live[other], now)
            outcome.conflicts.setdefault(id, []).append(other)


def _apart(a: Record, b: Record) -> bool:
    """Whether the rules read the two facts as about different things (another attribute,
    person or allergen): then a writer's word that one updates or contradicts the other is
    not applied (a small model names such pairs; the rules read few wordings, but exactly)."""
    x, y = slots.read(a.payload["content"]), slots.read(b.payload["content"])
    return x is not None and y is not None and x.key != y.key


async def _against(
    ctx: FactContext,
    owner: Scope,
    new: Record,
    others: list[Record],
    outcome: Outcome,
    now: float,
) -> None:
    slot = slots.read(new.payload["content"])
    if slot is None:
        return
    for old in sorted(others, key=lambda r: (when(r.payload), r.id)):
        held = slots.read(old.payload["content"])
        if held is None:
            continue
        later, earlier = _order(new, slot, old, held)
        if later is None or earlier is None:
            if slots.replaces(slot, held) or slots.replaces(held, slot):
                await _dispute(ctx, owner, new, old, now)
                outcome.conflicts.setdefault(new.id, []).append(old.id)
            continue
        if not slots.replaces(later[1], earlier[1]):
            continue
        await _supersede(ctx, owner, earlier[0], later[0], now)
        if earlier[0] is new:  # told late: the new fact is history at once
            outcome.superseded.setdefault(new.id, []).append(new.id)
            return
        outcome.superseded.setdefault(new.id, []).append(old.id)


Reading = tuple[Record, slots.Slot]


def _order(
    new: Record, slot: slots.Slot, old: Record, held: slots.Slot
) -> tuple[Reading | None, Reading | None]:
    """(later, earlier), or (None, None) when nothing tells which came first."""
    a, b = when(new.payload), when(old.payload)
    if a == b and slot.cue != held.cue:  # at one time, the one saying "now" is the later
        a, b = (1.0, 0.0) if slot.cue else (0.0, 1.0)
    if a == b:
        return None, None
    return ((new, slot), (old, held)) if a > b else ((old, held), (new, slot))


async def _supersede(
    ctx: FactContext, owner: Scope, earlier: Record, later: Record, now: float
) -> None:
    await ctx.set_payload(
        earlier.id,
        {
            "current": False,
            "superseded_by": later.id,
            "valid_until": when(later.payload),
            "updated_at": now,
        },
        owner,
    )
    if not later.payload.get("supersedes"):
        await ctx.set_payload(later.id, {"supersedes": earlier.id}, owner)


async def _dispute(ctx: FactContext, owner: Scope, a: Record, b: Record, now: float) -> None:
    for this, other in ((a.id, b.id), (b.id, a.id)):
        found = await ctx.get([this], owner)  # read again: an earlier dispute may have changed it
        held = list(found[0].payload.get("conflicts_with") or []) if found else []
        if found and other not in held:
            await ctx.set_payload(
                this, {"conflicts_with": [*held, other], "updated_at": now}, owner
            )
