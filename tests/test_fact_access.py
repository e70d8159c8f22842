"""Retrieval's access statistics go to the side table behind the reply, coalesced, never
into the indexed records (which a payload change would move out of their index), and are
never lost on a clean stop (fact memory over the real broker and edge store)."""

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
    """Counts the store's ``set_payload`` calls (what would move records out of the index)."""

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
        """The fact's access count as its record in the store says."""
        memory = self.processor.memory
        [record] = await self.processor.store.get(memory.ctx.collection, [id], scope=SCOPE)
        return int(record.payload["access_count"])


async def test_retrievals_count_without_writing_the_indexed_records(
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
        fact = await facts.one(carol)  # every read sees them
        assert (fact.access_count, fact.last_accessed) == (3, START + 2)
        [page] = await facts.listed()
        assert (page.access_count, page.last_accessed) == (3, START + 2)
        await facts.processor.memory.flush_access()
        assert facts.writes == []  # the record was never rewritten
        assert await facts.stored_count(carol) == 0


async def test_pending_statistics_reach_the_side_table_after_the_delay(
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
        table = facts.processor.memory.access.table
        for _ in range(500):  # no other operation: the timer writes them
            if facts.processor.memory.access.pending == 0:
                break
            await asyncio.sleep(0.02)
        [(id, owner, count, _)] = table.read([carol]).values()
        assert (id, owner, count) == (carol, ("ws-a", "default", ""), 2)
        assert facts.writes == []


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
        assert facts.processor.memory.access.pending == 1  # still pending
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
        assert await again.stored_count(carol) == 0  # from the side table
