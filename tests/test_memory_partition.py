"""Partitioned replicas of a memory service: each serves the owners that hash to it, with its
own embedded store, so every request is answered by exactly one replica and no owner's
memory is seen through another's partition. Over the real broker, with generated owners."""

from __future__ import annotations

import contextlib
import random
import string
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from memory_services.partition import Partition, of
from react_mem.bus.transport import Transport
from react_mem.errors import ConfigurationError
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, Running, serving, topics


@pytest.mark.parametrize(("text", "expected"), [("", (0, 1)), ("0/2", (0, 2)), (" 3/4", (3, 4))])
def test_a_partition_is_spelt_i_of_n(text: str, expected: tuple[int, int]) -> None:
    p = Partition.parse(text)
    assert (p.index, p.count) == expected


@pytest.mark.parametrize("text", ["2/2", "1", "-1/2", "a/b", "1/0", "0/2/3"])
def test_a_misspelt_partition_is_refused(text: str) -> None:
    with pytest.raises(ConfigurationError, match="expected i/n"):
        Partition.parse(text)


def test_owners_spread_over_the_partitions_and_stay_put() -> None:
    rng = random.Random(7)
    users = ["".join(rng.choices(string.printable, k=rng.randint(1, 24))) for _ in range(2000)]
    for count in (2, 3, 4):
        sizes = [0] * count
        for user in users:
            part = of("ws", user, count)
            assert part == of("ws", user, count)  # stable
            owners = [i for i in range(count) if Partition(i, count).owns("ws", user)]
            assert owners == [part]  # exactly one replica serves an owner
            sizes[part] += 1
        assert min(sizes) > len(users) / count * 0.8, sizes
    # The shared memory (no user) is one owner, however it is spelt.
    assert of("ws", None, 4) == of("ws", "", 4)


@contextlib.asynccontextmanager
async def replicas(
    transport: Transport, registry: CollectorRegistry, tmp_path: Path, unique: str, count: int
) -> AsyncIterator[list[Running[FactMemoryProcessor, FactRequest, FactResponse]]]:
    """``count`` fact-memory replicas on one flow's queues, each its own id and store."""
    queues = {"ws-a": topics("fact-memory", unique, "ws-a")}
    async with contextlib.AsyncExitStack() as stack:
        running = [
            await stack.enter_async_context(
                serving(
                    FactMemoryProcessor,
                    FactResponse,
                    transport,
                    pid=f"fact-memory-{unique}-p{i}",
                    queues=queues,
                    data_dir=tmp_path / f"facts-{i}",
                    registry=registry,
                    clock=MovableClock(),
                    embedder=HashingEmbedder(),
                    partition=f"{i}/{count}",
                    retry_delay=0.01,
                    metrics=False,
                )
            )
            for i in range(count)
        ]
        yield running


def passed(registry: CollectorRegistry, pid: str) -> float:
    value = registry.get_sample_value("tg_memory_partition_passed_total", {"processor": pid})
    return value or 0.0


@pytest.mark.broker
async def test_each_owner_is_served_by_one_replica_and_sees_only_its_own(
    transport: Transport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    rng = random.Random(unique)
    users: list[str | None] = [None, *(f"u{rng.getrandbits(40):x}" for _ in range(24))]
    async with replicas(transport, registry, tmp_path, unique, 2) as (first, second):
        for user in users:
            stored = await first.ask(
                FactRequest(
                    operation="store",
                    user=user,
                    facts=[FactInput(content=f"the code word of {user or 'everyone'} is {user}")],
                ),
                "ws-a",
            )
            assert stored.error is None and len(stored.stored) == 1
        for user in users:
            found = await second.ask(
                FactRequest(operation="list", user=user, limit=100), "ws-a"
            )
            assert found.error is None
            assert [f.content for f in found.facts] == [
                f"the code word of {user or 'everyone'} is {user}"
            ]
        forgotten = await first.ask(FactRequest(operation="forget", user=users[1]), "ws-a")
        assert forgotten.error is None and forgotten.deleted == 1
        left = await first.ask(FactRequest(operation="list", user=users[1], limit=100), "ws-a")
        assert left.facts == []

        requests = 2 * len(users) + 2
        by = [passed(registry, r.processor.id) for r in (first, second)]
        assert sum(by) == requests  # each request passed on by exactly the other replica
        assert all(n > 0 for n in by), by  # both served some owners


@pytest.mark.broker
async def test_a_replica_needs_its_own_store(
    transport: Transport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """Two replicas given one store directory: the second is refused, never shares it."""
    queues = {"ws-a": topics("fact-memory", unique, "ws-a")}

    def one(i: int) -> contextlib.AbstractAsyncContextManager[object]:
        return serving(
            FactMemoryProcessor,
            FactResponse,
            transport,
            pid=f"fact-memory-{unique}-p{i}",
            queues=queues,
            data_dir=tmp_path / "facts",
            registry=registry,
            clock=MovableClock(),
            embedder=HashingEmbedder(),
            partition=f"{i}/2",
            metrics=False,
        )

    async with one(0):
        with pytest.raises(ConfigurationError, match="in use"):
            async with one(1):
                pass
