"""Helpers for memory-service integration tests: a movable clock, flow files and a running
service with a client per workspace, over the real broker, store and embedder."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry
from pydantic import Field

from memory_services.processor import MemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.embedding.base import Embedder
from react_mem.schema import WireModel

Req = TypeVar("Req", bound=WireModel)
Resp = TypeVar("Resp", bound=WireModel)
P = TypeVar("P", bound=MemoryProcessor[Any, Any])

START = 1_700_000_000.0


class MovableClock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def topics(name: str, unique: str, workspace: str, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The service's queues for one workspace (flow ``f1``), unique to the test."""
    tail = f"{name}-{unique}:{workspace}:f1"
    found = {"request": f"request:tg:{tail}", "response": f"response:tg:{tail}"}
    found |= {spec: f"flow:tg:{spec}-{unique}:{workspace}:f1" for spec in extra}
    return found


def flows_file(
    path: Path,
    pid: str,
    by_workspace: dict[str, dict[str, str]],
    config: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """The flow file; ``config`` adds other config types per workspace (e.g. agent-mem)."""
    definition = {
        ws: {f"processor:{pid}": {"f1": {"topics": t}}, **(config or {}).get(ws, {})}
        for ws, t in by_workspace.items()
    }
    path.write_text(json.dumps(definition))  # JSON is YAML
    return path


@dataclass
class Running(Generic[P, Req, Resp]):
    processor: P
    clients: dict[str, RequestResponseClient[Req, Resp]] = field(default_factory=dict)

    async def ask(self, request: Req, workspace: str = "default") -> Resp:
        return await self.clients[workspace].request(request)


@contextlib.asynccontextmanager
async def serving(
    cls: type[P],
    response: type[Resp],
    transport: PulsarTransport,
    *,
    pid: str,
    queues: dict[str, dict[str, str]],
    data_dir: Path,
    registry: CollectorRegistry,
    clock: MovableClock,
    config: dict[str, dict[str, Any]] | None = None,
    embedder: Embedder | None = None,
    **settings: Any,
) -> AsyncIterator[Running[P, Any, Resp]]:
    """Start ``cls`` with one flow per workspace in ``queues`` and a client for each;
    ``embedder``: default the real model (pass a ``HashingEmbedder`` unless the test is
    about what the model finds)."""
    flows = flows_file(data_dir.parent / f"flows-{pid}.yaml", pid, queues, config)
    loaded = cls.Settings.load(
        {"id": pid, "flows": flows, "data_dir": data_dir, "concurrency": 4, **settings}
    )
    processor = cls(loaded, transport, registry=registry, clock=clock, embedder=embedder)
    await processor.start()
    running: Running[P, Any, Resp] = Running(processor)
    try:
        for workspace, t in queues.items():
            client: RequestResponseClient[Any, Resp] = RequestResponseClient(
                transport, t["request"], t["response"], response, timeout=30
            )
            await client.start()
            running.clients[workspace] = client
        yield running
    finally:
        for client in running.clients.values():
            await client.close()
        await processor.stop()


class Raw(WireModel):
    """Any JSON object as a request, to send what a real model would refuse to build."""

    body: dict[str, Any] = Field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(self.body).encode()


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Poll an async ``check`` until true, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def after_sweeps(processor: Any, more: int = 2, timeout: float = 20.0) -> None:
    """Wait until ``processor``'s background loop has run ``more`` whole sweeps from now (all
    a sweep sends is sent when it returns): "no sweep does X" is then shown by what the
    sweeps did, whatever the machine's speed, not by a pause long enough on a fast one."""
    sweep = processor.sweep
    done = 0

    async def counted(*args: Any) -> None:
        nonlocal done
        await sweep(*args)
        done += 1

    processor.sweep = counted
    try:
        deadline = time.monotonic() + timeout
        while done < more:
            if time.monotonic() > deadline:
                raise AssertionError(f"{more} sweeps did not run in time")
            await asyncio.sleep(0.01)
    finally:
        del processor.sweep
