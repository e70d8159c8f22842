"""A reply over the bus's message limit is refused at once with an error naming the limit
(issue 26, finding 3): before, on Pulsar it held a handler slot until the broker's send
timeout (~16 s) and then failed; on RabbitMQ it went through. Now both brokers answer the
same clear ``too-large`` error, and the service goes on serving.

Real broker (both where installed), fact-memory with its real store (a hashing embedder:
what is stored, not what the model finds, matters here).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, serving, topics

pytestmark = pytest.mark.broker

#: 3,990 characters of three bytes each in UTF-8 (a search's reply is written compact, in
#: UTF-8, not escaped): 450 such facts make a reply over the 5 MiB limit.
WIDE = "\u1e01" * 3990  # a letter (one word), as "é" is


async def test_a_reply_over_the_message_limit_is_refused_at_once(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
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
        metrics=False,
    ) as svc:
        for batch in range(9):  # 450 facts, each its own text
            facts = [FactInput(content=f"{batch}-{n:03d} {WIDE}") for n in range(50)]
            stored = await svc.ask(FactRequest(operation="store", user="ada", facts=facts), "ws")
            assert stored.error is None, stored.error
        big = await svc.ask(FactRequest(operation="list", user="ada", limit=450), "ws")
        small = await svc.ask(FactRequest(operation="list", user="ada", limit=10), "ws")
    assert big.error is not None and big.error.type == "too-large"
    assert "message limit of 5242880 bytes" in big.error.message
    assert "offset" in big.error.message  # says how to get it: in pages
    assert small.error is None and len(small.facts) == 10
