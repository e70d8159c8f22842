"""The side table of retrieval statistics: laid over every read, taken in by the writes that
set them, owned like the facts (hypothesis-drawn owners), gone with them (delete, purge,
sweep, forget: no byte left). Fact memory in process on the real edge store and SQLite."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import strategies as st

from memory_services.facts import records as rec
from memory_services.facts.fact_memory import FactMemory
from memory_services.facts.service import ACCESS_FILE
from memory_services.store import sentences
from memory_services.store.base import Scope
from memory_services.store.edge import EdgeStore
from react_mem.schema.facts import FactInput
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import START, MovableClock
from tests.test_fuzz_queues import drawn_from
from tests.test_isolation import WORKSPACES, collections, users

CAROL = "Carol has a pet tortoise named Sheldon."
TWO_SENTENCES = "Carol has a pet tortoise named Sheldon. He is forty years old."


@dataclass
class Memory:
    memory: FactMemory
    store: EdgeStore
    clock: MovableClock
    root: Path

    async def add(self, scope: Scope, content: str, **fields: object) -> str:
        self.clock.advance(1)
        [stored], _ = await self.memory.store(scope, [FactInput(content=content, **fields)])  # type: ignore[arg-type]
        return stored.id

    async def retrieve(self, scope: Scope, content: str, times: int = 1) -> None:
        for _ in range(times):
            self.clock.advance(1)
            found = await self.memory.retrieve(scope, query=content, top_k=1)
            assert [f.content for f in found] == [content]

    async def stats(self, scope: Scope, id: str) -> tuple[int, float | None]:
        [fact], _ = await self.memory.get(scope, [id])
        return fact.access_count, fact.last_accessed

    async def stored_count(self, scope: Scope, id: str) -> int:
        [record] = await self.store.get(self.memory.ctx.collection, [id], scope=scope)
        return int(record.payload["access_count"])

    async def rows(self, scope: Scope) -> list[str]:
        """The owner's ids in the side table (what is pending written first)."""
        await self.memory.flush_access()
        return self.memory.access.table.ids_of(scope.workspace, scope.collection, scope.user or "")


@contextlib.asynccontextmanager
async def fact_memory(root: Path, **policy: object) -> AsyncIterator[Memory]:
    store = EdgeStore(root, flush_interval=0)
    await store.open()
    clock = MovableClock(START)
    memory = FactMemory(
        store,
        HashingEmbedder(),
        policy=rec.FactPolicy(**policy),  # type: ignore[arg-type]
        clock=clock,
        access_delay=3600,
        access_path=root / ACCESS_FILE,
    )
    await memory.ensure()
    try:
        yield Memory(memory, store, clock, root)
    finally:
        await memory.close()
        await store.close()


def holding(root: Path, needle: bytes) -> list[Path]:
    """The files under ``root`` whose bytes hold ``needle``."""
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


owners = st.lists(
    st.builds(Scope, st.sampled_from(WORKSPACES), collections, users),
    min_size=3,
    max_size=6,
    unique_by=lambda s: (s.workspace, s.collection, s.user),
)


async def test_each_owner_sees_only_its_own_retrievals_and_a_purge_takes_only_its_rows(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rounds = max(1, request.config.getoption("--fuzz-examples") // 5)
    for n, drawn in enumerate(drawn_from(owners, rounds)):
        async with fact_memory(tmp_path / f"round-{n}") as m:
            # One wording for all: ids differ by owner only. Owner i retrieves it i+1 times.
            ids = [await m.add(owner, CAROL) for owner in drawn]
            assert len(set(ids)) == len(drawn)
            for i, owner in enumerate(drawn):
                await m.retrieve(owner, CAROL, times=i + 1)
            if n % 2:
                await m.memory.flush_access()  # read from the table, else from what is pending
            for i, owner in enumerate(drawn):
                assert (await m.stats(owner, ids[i]))[0] == i + 1, owner
                assert await m.rows(owner) == [ids[i]]
                foreign = [x for j, x in enumerate(ids) if j != i]
                found, missing = await m.memory.get(owner, foreign)
                assert (found, missing) == ([], foreign)
            gone, *kept = drawn
            assert await m.memory.purge(gone) == 1
            assert await m.rows(gone) == []
            for i, owner in enumerate(kept, start=1):
                assert (await m.stats(owner, ids[i]))[0] == i + 1
                assert await m.rows(owner) == [ids[i]]


async def test_writes_that_set_the_statistics_take_the_rows_in(tmp_path: Path) -> None:
    scope = Scope("ws-a", "default", "carol")
    async with fact_memory(tmp_path) as m:
        carol = await m.add(scope, CAROL)
        await m.retrieve(scope, CAROL, times=3)
        accessed = m.clock.now
        assert await m.stored_count(scope, carol) == 0  # the record itself is untouched
        # A restatement is one more access: written into the record with the retrievals.
        await m.add(scope, CAROL)
        assert await m.stats(scope, carol) == (4, accessed)
        assert await m.stored_count(scope, carol) == 4
        assert await m.rows(scope) == []
        # A supersede keeps the old version's statistics (history) and starts the new one.
        await m.retrieve(scope, CAROL, times=2)
        new = await m.memory.update(scope, carol, FactInput(content="Carol's tortoise is Shelly."))
        assert (await m.stats(scope, carol))[0] == 6
        assert (await m.stats(scope, new.id))[0] == 0


async def test_quota_eviction_reads_the_latest_use_from_the_side_table(tmp_path: Path) -> None:
    scope = Scope("ws-a", "default", "carol")
    async with fact_memory(tmp_path, max_facts_per_scope=2) as m:
        old = await m.add(scope, "Carol's first car was a red Fiat.")
        newer = await m.add(scope, "Carol moved to Leeds in spring.")
        await m.retrieve(scope, "Carol's first car was a red Fiat.")  # in the table only
        _, evicted = await m.memory.store(scope, [FactInput(content="Carol sings.")], evict=True)
        assert evicted == [newer]  # the least recently used, though created after ``old``
        assert (await m.stats(scope, old))[0] == 1


async def test_deleted_and_expired_facts_leave_no_rows(tmp_path: Path) -> None:
    scope = Scope("ws-a", "default", "carol")
    async with fact_memory(tmp_path) as m:
        gone = await m.add(scope, "Carol's locker code is 4411.")
        brief = await m.add(scope, CAROL, ttl_seconds=30)
        kept = await m.add(scope, "Carol plays the cello.")
        for content in ("Carol's locker code is 4411.", CAROL, "Carol plays the cello."):
            await m.retrieve(scope, content)
        assert sorted(await m.rows(scope)) == sorted([gone, brief, kept])
        assert await m.memory.delete(scope, [gone]) == 1
        m.clock.advance(60)
        removed, _ = await m.memory.sweep()
        assert removed == 1
        assert await m.rows(scope) == [kept]
        assert (await m.stats(scope, kept))[0] == 1


async def test_forgetting_a_user_leaves_no_byte_of_them_in_the_side_table(
    tmp_path: Path,
) -> None:
    alice, bob = Scope("ws-a", "default", "quokkaalice"), Scope("ws-a", "default", "quokkabob")
    async with fact_memory(tmp_path) as m:
        for scope in (alice, bob):
            await m.add(scope, CAROL)
            await m.retrieve(scope, CAROL, times=2)
        # A fact of two sentences: its sentences' vectors are stored in its record.
        told = await m.add(alice, TWO_SENTENCES)
        [record] = await m.store.get(m.memory.ctx.collection, [told], scope=alice)
        vectors = str(record.payload[sentences.KEY]).encode()
        await m.store.flush()
        assert holding(tmp_path, vectors)
        await m.memory.flush_access()
        await m.memory.access.table.checkpoint()
        table = [tmp_path / f"{ACCESS_FILE}{end}" for end in ("", "-wal", "-shm")]
        assert any(b"quokkaalice" in p.read_bytes() for p in table if p.exists())
        forgotten = await m.memory.forget("ws-a", "", "quokkaalice")
        assert forgotten.records["facts"] == 2
        for path in table:
            assert not path.exists() or b"quokkaalice" not in path.read_bytes(), path
        assert holding(tmp_path, vectors) == []  # nor of their sentences' vectors
        assert await m.rows(bob) != []
