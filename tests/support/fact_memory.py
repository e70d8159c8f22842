"""A fact-memory processor on the real bus for tests, and a client with shorthand calls."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.facts import FACT_OPERATIONS, Fact, FactInput, FactRequest, FactResponse
from tests.support.memory_services import MovableClock, Raw, Running, serving, topics


@dataclass
class FactService:
    running: Running[FactMemoryProcessor, FactRequest, FactResponse]
    clock: MovableClock
    registry: CollectorRegistry
    topics: dict[str, dict[str, str]]

    @property
    def processor(self) -> FactMemoryProcessor:
        return self.running.processor

    async def ask(self, operation: str, *, workspace: str = "ws-a", **fields: Any) -> FactResponse:
        """``operation`` may be one the service lacks: then the request goes as raw JSON (a
        :class:`FactRequest` cannot be built with it)."""
        if operation not in FACT_OPERATIONS:
            return await self.running.ask(Raw(body={"operation": operation, **fields}), workspace)
        return await self.running.ask(FactRequest(operation=operation, **fields), workspace)

    async def ok(self, operation: str, **fields: Any) -> FactResponse:
        response = await self.ask(operation, **fields)
        assert response.error is None, response.error
        return response

    async def error(self, operation: str, **fields: Any) -> str:
        response = await self.ask(operation, **fields)
        assert response.error is not None, "expected an error reply"
        assert not response.facts and not response.stored and response.consolidation is None
        return response.error.type

    async def store(self, *contents: str, **fields: Any) -> list[str]:
        facts = [FactInput(content=c) for c in contents]
        response = await self.ok("store", facts=facts, **fields)
        return [s.id for s in response.stored]

    async def listed(self, **fields: Any) -> list[Fact]:
        return (await self.ok("list", limit=1000, **fields)).facts

    async def one(self, id: str, **fields: Any) -> Fact:
        [fact] = (await self.ok("get", ids=[id], **fields)).facts
        return fact

    def gauge(self, family: str, **labels: str) -> float | None:
        """A sample of this processor's ``family`` for fact records."""
        labels = {"processor": self.processor.id, "kind": "fact", **labels}
        return self.registry.get_sample_value(family, labels)


S = TypeVar("S", bound=FactService)


@contextlib.asynccontextmanager
async def fact_service(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    *,
    client: type[S],
    workspaces: tuple[str, ...] = ("ws-a",),
    **settings: Any,
) -> AsyncIterator[S]:
    """A fact-memory processor with one flow per workspace, and ``client`` over them."""
    queues = {ws: topics("fact-memory", unique, ws) for ws in workspaces}
    clock = MovableClock()
    async with serving(
        FactMemoryProcessor,
        FactResponse,
        transport,
        pid=f"fact-memory-{unique}",
        queues=queues,
        data_dir=tmp_path / "facts",
        registry=registry,
        clock=clock,
        **({"retry_delay": 0.01, "metrics": False} | settings),
    ) as running:
        yield client(running, clock, registry, queues)
