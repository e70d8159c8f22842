"""A call made before its service listens is answered once the service is up (issue 26,
finding 8): the learner's memory clients resend until the service has answered them once,
instead of waiting out their whole timeout for a request the broker dropped (requests are
non-persistent: sent before a subscriber exists, they go nowhere).

Real broker (both where installed), a real ping processor started after the call is made.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.errors import RequestTimeout
from react_mem.learner.service import MemoryLearnerProcessor
from react_mem.ping.service import PingProcessor
from react_mem.schema.ping import PingRequest, PingResponse
from tests.support.ping import PingClient, flow_file
from tests.support.sends import SendsSeen

pytestmark = pytest.mark.broker

#: The call's own timeout: long enough that the service is up well within it.
TIMEOUT = 20.0


async def call_then_start(
    transport: Transport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    *,
    timeout: float = TIMEOUT,
    resend: float | None = None,
) -> tuple[PingClient, PingResponse | RequestTimeout]:
    """A request sent while nothing listens; the ping service started once the request is
    surely gone; what the call got."""
    pid = f"ping-{unique}"
    topics = {"request": f"request:tg:ping-{unique}", "response": f"response:tg:ping-{unique}"}
    seen = SendsSeen(transport)
    rpc: PingClient = RequestResponseClient(
        seen, topics["request"], topics["response"], PingResponse, resend=resend
    )
    await rpc.start()
    call = asyncio.create_task(rpc.request(PingRequest(message="early"), timeout=timeout))
    await seen.wait_sent(Queue.parse(topics["request"]).id)  # dropped: no one subscribed
    settings = PingProcessor.Settings.load({"id": pid, "flows": flow_file(tmp_path, pid, topics)})
    processor = PingProcessor(settings, transport, registry=registry)
    await processor.start()
    try:
        try:
            got: PingResponse | RequestTimeout = await call
        except RequestTimeout as exc:
            got = exc
    finally:
        await rpc.close()
        await processor.stop()
    return rpc, got


async def test_a_call_made_before_its_service_listens_is_answered_when_it_starts(
    transport: Transport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    rpc, got = await call_then_start(transport, registry, tmp_path, unique, resend=0.25)
    assert isinstance(got, PingResponse) and got.message == "early"
    assert rpc.resent >= 1 and rpc.heard


async def test_without_resending_the_same_call_waits_out_its_timeout(
    transport: Transport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """The fault as it was: the request sent before the service listened is never answered."""
    rpc, got = await call_then_start(transport, registry, tmp_path, unique, timeout=2.0)
    assert isinstance(got, RequestTimeout) and rpc.resent == 0


def test_the_learner_resends_to_every_memory_service() -> None:
    learner = MemoryLearnerProcessor(
        MemoryLearnerProcessor.Settings.load({"id": "learner"}),
        transport=None,  # type: ignore[arg-type]
    )
    specs = [s for s in learner.specifications if hasattr(s, "resend")]
    memory = [s for s in specs if "memory" in s.request]
    assert memory and all(s.resend == 1.0 for s in memory)
