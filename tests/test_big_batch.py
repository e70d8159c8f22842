"""One maximum-size batch does not hold the other requests of its process (issue 26,
finding 4): planning a batch (near-duplicate reading of every fact) is CPU work on the
event loop, which before held everything in the process for the batch's whole length
(256 facts of 4,000 characters: ~100 s). Now each text is read once and the plan yields
between facts, so small requests sent while the batch is being stored are answered
meanwhile. Speed is measured by ``benchmarks/big_batch.py``; this checks the interleaving.

Real broker (both where installed), fact-memory's real store; a hashing embedder and no
PII screen, so the batch's time is its own planning.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, serving, topics

pytestmark = pytest.mark.broker

#: Few words: every fact is a near-duplicate candidate of every other (the worst case).
WORDS = ["river", "lantern", "copper", "meadow", "quiet", "harbour", "velvet", "orbit"]


def text(rng: random.Random, chars: int = 4000) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(chars // 6))[:chars]


async def test_small_requests_are_answered_while_a_maximum_batch_is_stored(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    rng = random.Random(3)
    async with serving(
        FactMemoryProcessor,
        FactResponse,
        transport,
        pid=f"fact-memory-{unique}",
        queues={"ws": topics("fact-memory", unique, "ws")},
        data_dir=tmp_path / "facts",
        registry=registry,
        clock=MovableClock(),
        embedder=HashingEmbedder(),
        pii_policy="allow",
        near_duplicate_threshold=0.5,
        metrics=False,
    ) as svc:
        svc.clients["ws"].timeout = 600
        batch = [FactInput(content=text(rng)) for _ in range(256)]
        store = asyncio.create_task(
            svc.ask(FactRequest(operation="store", user="ada", facts=batch), "ws")
        )
        meanwhile = 0
        while not store.done():
            small = await svc.ask(FactRequest(operation="list", user="bob", limit=1), "ws")
            assert small.error is None
            meanwhile += not store.done()
        stored = await store
    assert stored.error is None and len(stored.stored) == 256
    assert meanwhile >= 3, meanwhile
