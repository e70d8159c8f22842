"""A retrieval over several playbooks (the requester's own, the collection's, those shared
with them) holds them together: their locks are taken in one order, each playbook is loaded
once, its clock moves with the others' in one write. On the real edge store: what it
returns, and what a fresh service over the same store then reads, is the same as ever."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_services.playbook.playbook_memory import PlaybookMemory
from memory_services.playbook.records import PlaybookPolicy, ScopeKey
from memory_services.playbook.scoring import DecayRates
from memory_services.store.base import Record, StoreScope, VectorStore
from memory_services.store.edge import EdgeStore
from react_mem.schema.playbook import Bullet, Delta, DeltaOperation, Weights
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock

BASE = ScopeKey("ws", "c", "ctx")
ALICE, BOB = BASE.of("alice"), BASE.of("bob")
#: Relevance only, so that a score is its relevance plus the boosts.
RELEVANCE = Weights(relevance=1, strength=0, type=0)


class NetworkedStore:
    """The real store, whose every read and write first lets the event loop run others (as
    a Qdrant server's network round trip does; the embedded engine's calls never do)."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
        await asyncio.sleep(0)
        return await self._store.get(collection, ids, scope=scope)

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        await asyncio.sleep(0)
        await self._store.upsert(collection, records)


class FailingTouch:
    """The real store, whose bullet payload updates (a retrieval's access indexes, written
    after the clocks) fail while ``failures`` lasts."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def set_payload(self, *args: Any, **kwargs: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("injected: the access index write failed")
        await self._store.set_payload(*args, **kwargs)


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[EdgeStore]:
    store = EdgeStore(tmp_path / "store")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def memory_on(store: Any) -> PlaybookMemory:
    memory = PlaybookMemory(
        store,
        HashingEmbedder(),
        policy=PlaybookPolicy(min_relevance=0.0),
        rates=DecayRates(),
        clock=MovableClock(),
    )
    await memory.ensure()
    return memory


def add(content: str, **fields: Any) -> DeltaOperation:
    return DeltaOperation(type="ADD", content=content, **fields)


async def retrieve(
    memory: PlaybookMemory, user: str, query: str, **options: Any
) -> tuple[list[Bullet], int]:
    """As the service's ``retrieve`` asks it: every playbook ``user`` reads; the clocks of
    their own and the collection's move."""
    keys = await memory.access.readable(BASE, user)
    advance = [k for k in keys if k.owner in (None, user or None)]
    options = {"weights": "default"} | options
    found, pb = await memory.retrieve(
        keys, query=query, vector=None, top_k=5, advance=advance, user=user or None, **options
    )
    return found, pb.clock


async def test_retrievals_over_playbooks_shared_both_ways_never_wait_on_each_other(
    edge: EdgeStore,
) -> None:
    """alice reads her own, the collection's and bob's; bob his own, the collection's and
    alice's. Taken in each request's own order, with reads that suspend, a third request
    finds alice's lock held by one and bob's by another, each waiting for the other's."""
    memory = await memory_on(NetworkedStore(edge))
    await memory.apply(ALICE, Delta(delta_id="a", operations=[add("Quote the invoice number.")]))
    await memory.apply(BOB, Delta(delta_id="b", operations=[add("Quote the order number.")]))
    await memory.apply(BASE, Delta(delta_id="c", operations=[add("Quote the source.")]))
    await memory.access.grant(ALICE, "viewer", ["bob"])
    await memory.access.grant(BOB, "viewer", ["alice"])

    asks = [retrieve(memory, user, "Which number do I quote?") for user in ["alice", "bob"] * 3]
    done = await asyncio.wait_for(asyncio.gather(*asks), timeout=30)

    for found, _ in done:  # each saw the three playbooks
        assert {b.content for b in found} == {
            "Quote the invoice number.",
            "Quote the order number.",
            "Quote the source.",
        }
    # Each request moved its requester's clock and the collection's once, one at a time.
    assert sorted(clock for _, clock in done[0::2]) == [1, 2, 3]
    assert (await memory.stats(BASE)).clock == 6
    assert len(memory._locks) == 0  # and left no lock behind


async def test_the_clocks_and_access_indexes_a_retrieval_moves_are_in_the_store(
    edge: EdgeStore,
) -> None:
    memory = await memory_on(edge)
    await memory.apply(ALICE, Delta(delta_id="a", operations=[add("Check the VAT rate first.")]))
    await memory.apply(BASE, Delta(delta_id="c", operations=[add("Check the exchange rate.")]))
    await memory.access.grant(BOB, "viewer", ["alice"])
    await memory.apply(BOB, Delta(delta_id="b", operations=[add("Check the rate card.")]))
    for _ in range(3):
        found, clock = await retrieve(memory, "alice", "Which rate do I check?")
    assert len(found) == 3 and clock == 3

    fresh = await memory_on(edge)  # nothing cached: what the store holds
    for key, clock in ((ALICE, 3), (BASE, 3), (BOB, 0)):  # bob's is alice's to read only
        pb = await fresh.stats(key)
        assert pb.clock == clock
        [bullet] = pb.bullets.values()
        assert bullet.procedural_access_index == clock
        assert pb.bullets == (await memory.stats(key)).bullets
    returned = {b.id: b for b in found}
    for key in (ALICE, BASE):
        [bullet] = (await fresh.stats(key)).bullets.values()
        scores = dict.fromkeys(("score", "relevance", "strength", "decay_score"))
        as_stored = scores | {"confidence": bullet.confidence}
        assert returned[bullet.id].model_copy(update=as_stored) == bullet


async def test_a_failed_access_write_leaves_each_playbook_as_the_store_has_it(
    edge: EdgeStore,
) -> None:
    """The clocks are written, then each playbook's access indexes: when those fail the
    retrieval fails, and the next one reads what the store holds (nothing is lost)."""
    store = FailingTouch(edge)
    memory = await memory_on(store)
    await memory.apply(ALICE, Delta(delta_id="a", operations=[add("Check the VAT rate first.")]))
    await memory.apply(BASE, Delta(delta_id="c", operations=[add("Check the exchange rate.")]))
    store.failures = 1
    with pytest.raises(RuntimeError, match="injected"):
        await retrieve(memory, "alice", "Which rate do I check?")
    fresh = await memory_on(edge)
    for key in (ALICE, BASE):
        assert (await memory.stats(key)).clock == (await fresh.stats(key)).clock == 1
        assert (await memory.stats(key)).bullets == (await fresh.stats(key)).bullets
    found, clock = await retrieve(memory, "alice", "Which rate do I check?")
    assert len(found) == 2 and clock == 2


async def test_a_bullet_added_with_a_topic_gets_the_topic_boost_at_once(edge: EdgeStore) -> None:
    """Which bullets have a topic is worked out once per playbook change: a retrieval after
    an ADD sees the new bullet's topic, though the playbook was ranked before it."""
    memory = await memory_on(edge)
    await memory.apply(BASE, Delta(delta_id="a", operations=[add("Retry after a 429.")]))
    question = "How much VAT is in a price of 120?"
    found, _ = await retrieve(memory, "", question, weights=RELEVANCE, advance_clock=False)
    assert [b.score == b.relevance for b in found] == [True]  # no topic named: no boost
    vat = add("Quote VAT on the net price.", topic="VAT")
    await memory.apply(BASE, Delta(delta_id="b", operations=[vat]))
    found, _ = await retrieve(memory, "", question, weights=RELEVANCE, advance_clock=False)
    boosted = {b.content: (b.score or 0.0) - (b.relevance or 0.0) for b in found}
    assert boosted == pytest.approx({"Quote VAT on the net price.": 0.1, "Retry after a 429.": 0.0})
