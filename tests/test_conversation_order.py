"""conversation-memory serves each conversation's operations in the order they arrive: a
``get`` sent after an ``append`` (without waiting for its reply) reads the turn, however
long the append's PII screen takes. Real broker and embedded store; the append's screen is
held by an event until the ``get`` has arrived, so the old order (the ``get`` served while
the append is screened) answers without the turn."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.store.base import Scope
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.conversations import ConversationRequest
from tests.test_conversation_memory import append, conversation_service

pytestmark = pytest.mark.broker


async def test_a_get_sent_after_an_append_reads_its_turn_while_the_append_is_screened(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        processor = service.processor
        screen, turn = processor.pii.screen, processor.order.turn
        screening, release, arrived = asyncio.Event(), asyncio.Event(), asyncio.Event()
        entered: list[str] = []

        async def held_screen(workspace: str, request: Any) -> Any:
            if request.operation == "append":
                screening.set()
                await release.wait()  # held until the get is in line behind it
            return await screen(workspace, request)

        @contextlib.asynccontextmanager
        async def recorded(scope: Scope) -> AsyncIterator[None]:
            entered.append(scope.conversation or "")
            arrived.set()
            async with turn(scope):
                yield

        processor.pii.screen = held_screen  # type: ignore[method-assign]
        processor.order.turn = recorded  # type: ignore[method-assign]
        appended = asyncio.ensure_future(service.ask(append("c1", 0)))
        await asyncio.wait_for(screening.wait(), 10)
        arrived.clear()
        read = asyncio.ensure_future(
            service.ask(ConversationRequest(operation="get", conversation_id="c1"))
        )
        await asyncio.wait_for(arrived.wait(), 10)  # the get is in the service now
        assert entered == ["c1", "c1"]
        release.set()
        got = await asyncio.wait_for(read, 10)
        stored = await asyncio.wait_for(appended, 10)
        assert stored.error is None and stored.created
        assert got.error is None and got.conversation is not None
        assert [t.query for t in got.conversation.turns] == ["question 0 about the garden"]


async def test_operations_on_other_conversations_do_not_wait(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        processor = service.processor
        screen = processor.pii.screen
        screening, release = asyncio.Event(), asyncio.Event()

        async def held_screen(workspace: str, request: Any) -> Any:
            if request.operation == "append" and request.conversation_id == "c1":
                screening.set()
                await release.wait()
            return await screen(workspace, request)

        processor.pii.screen = held_screen  # type: ignore[method-assign]
        held = asyncio.ensure_future(service.ask(append("c1", 0)))
        await asyncio.wait_for(screening.wait(), 10)
        # Another conversation is served while c1's append is held.
        other = await asyncio.wait_for(service.ask(append("c2", 0)), 10)
        assert other.error is None and other.created
        assert not held.done()
        release.set()
        assert (await asyncio.wait_for(held, 10)).created
