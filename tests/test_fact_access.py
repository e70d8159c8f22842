"""Retrieval's access statistics are written behind the reply, coalesced, and never lost on
a clean stop (fact memory over the real broker, edge store and MiniLM)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.store.base import Scope
from react_mem.bus.pulsar import PulsarTransport
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService, fact_service
from tests.support.memory_services import START

pytestmark = pytest.mark.broker

QUESTION = "What kind of pet does Carol own?"
SCOPE = Scope("ws-a", "default")


class Counted(FactService):
    """Counts the store's ``set_payload`` calls (the access statistics' writes)."""

    writes: list[Sequence[str]]

    def count_writes(self) -> None:
        store = self.processor.store
        original = store.set_payload
        self.writes = []

        async def set_payload(collection: str, ids: Sequence[str], *a: Any, **kw: Any) -> None:
            self.writes.append(list(ids))
            await original(collection, ids, *a, **kw)

        store.set_payload = set_payload  # type: ignore[method-assign]

    async def stored_count(self, id: str) -> int:
        """The fact's access count as its record in the store says (no flush first)."""
        memory = self.processor.memory
        [record] = await self.processor.store.get(memory.ctx.collection, [id], scope=SCOPE)
        return int(record.payload["access_count"])


async def test_repeated_retrievals_are_written_once_before_the_next_operation(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport,
        registry,
        tmp_path,
        unique,
        client=Counted,
        embedder=HashingEmbedder(),
        access_write_delay=3600,
    ) as facts:
        [carol] = await facts.store("Carol has a pet tortoise named Sheldon.")
        facts.count_writes()
        counts = []
        for n in range(3):
            facts.clock.now = START + n
            found = (await facts.ok("retrieve", query=QUESTION, top_k=1)).facts
            counts.append((found[0].access_count, found[0].last_accessed))
        assert counts == [(1, START), (2, START + 1), (3, START + 2)]
        assert facts.writes == []  # none on the replies
        fact = await facts.one(carol)  # any other operation writes them first
        assert (fact.access_count, fact.last_accessed) == (3, START + 2)
        assert facts.writes == [[carol]]  # three retrievals, one write


async def test_pending_statistics_are_written_after_the_delay(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with fact_service(
        transport,
        registry,
        tmp_path,
        unique,
        client=Counted,
        embedder=HashingEmbedder(),
        access_write_delay=0.05,
    ) as facts:
        [carol] = await facts.store("Carol has a pet tortoise named Sheldon.")
        facts.count_writes()
        await facts.ok("retrieve", query=QUESTION, top_k=1)
        await facts.ok("retrieve", query=QUESTION, top_k=1)
        for _ in range(500):  # no other operation: the timer writes them
            if await facts.stored_count(carol) == 2:
                break
            await asyncio.sleep(0.02)
        assert await facts.stored_count(carol) == 2
        assert facts.writes == [[carol]]


async def test_a_clean_stop_writes_what_is_pending(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    settings: dict[str, Any] = {"access_write_delay": 3600}
    async with fact_service(
        transport,
        CollectorRegistry(),
        tmp_path,
        unique,
        client=Counted,
        embedder=HashingEmbedder(),
        **settings,
    ) as facts:
        [carol] = await facts.store("Carol has a pet tortoise named Sheldon.")
        facts.clock.now = START + 7
        await facts.ok("retrieve", query=QUESTION, top_k=1)
        await facts.ok("retrieve", query=QUESTION, top_k=1)
        assert await facts.stored_count(carol) == 0  # still pending
    async with fact_service(
        transport,
        CollectorRegistry(),
        tmp_path,
        unique,
        client=Counted,
        embedder=HashingEmbedder(),
        **settings,
    ) as again:
        fact = await again.one(carol)
        assert (fact.access_count, fact.last_accessed) == (2, START + 7)


async def test_writing_the_statistics_lets_other_requests_in_between_writes(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    # A second of retrievals leaves ~100 writes pending; written in one go, they held every
    # request that came meanwhile behind them (the retrieval p99 at 100k facts).
    async with fact_service(
        transport,
        registry,
        tmp_path,
        unique,
        client=Counted,
        embedder=HashingEmbedder(),
        access_write_delay=3600,
    ) as facts:
        pets = ["tortoise", "parrot", "ferret", "hamster", "rabbit", "kitten"]
        for pet in pets:
            await facts.store(f"Carol keeps a {pet} at her sister's flat.")
        for n, pet in enumerate(pets):  # each at its own time: six writes
            facts.clock.now = START + n
            [found] = (await facts.ok("retrieve", query=f"Carol's {pet}", top_k=1)).facts
            assert pet in found.content
        facts.count_writes()
        ticks, seen = [0], []
        store = facts.processor.store
        counted = store.set_payload

        async def set_payload(*a: Any, **kw: Any) -> None:
            seen.append(ticks[0])
            await counted(*a, **kw)

        store.set_payload = set_payload  # type: ignore[method-assign]

        async def ticker() -> None:
            while True:
                ticks[0] += 1
                await asyncio.sleep(0)

        other = asyncio.create_task(ticker())
        try:
            await facts.processor.memory.flush_access()
        finally:
            other.cancel()
        assert len(facts.writes) == len(pets)
        assert seen == sorted(set(seen)), seen  # the loop ran between any two writes
