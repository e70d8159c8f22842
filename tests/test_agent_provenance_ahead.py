"""The question's provenance (the question, the memory in the prompt) goes out beside the
LLM call, not before it, and still ahead of every later message of the stream. Real broker,
agent and conversation memory; scripted LLM; the agent's response producer wrapped so an
explain message's send waits until the LLM has been asked (which an agent that sent its
provenance first never does)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer, Transport
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import agent_stack

pytestmark = pytest.mark.broker

#: How long an explain send waits for the LLM to be asked before it goes out anyway.
BOUND = 10.0


class HeldExplains:
    """The real transport; on the agent's response queue an ``explain`` message's send
    waits (at most ``BOUND``) for ``asked``, and notes whether it was set by then."""

    def __init__(self, inner: Transport, unique: str) -> None:
        self.inner, self.responses = inner, f"response:tg:agent-{unique}"
        self.asked = asyncio.Event()
        #: Per explain message sent: its id, and whether the LLM had been asked by then.
        self.llm_asked_first: list[tuple[str, bool]] = []

    async def connect(self) -> None:
        await self.inner.connect()

    async def producer(self, queue: Queue) -> Producer:
        inner = await self.inner.producer(queue)
        return _Held(self, inner) if queue.id.startswith(self.responses) else inner

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> Consumer:
        return await self.inner.consumer(queue, subscription, from_earliest=from_earliest)

    async def close(self) -> None:
        """The inner transport is the fixture's to close."""


class _Held:
    def __init__(self, held: HeldExplains, inner: Producer) -> None:
        self.held, self.inner = held, inner

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        message = json.loads(data)
        if message["message_type"] == "explain":
            try:
                await asyncio.wait_for(self.held.asked.wait(), BOUND)
            except TimeoutError:
                pass
            self.held.llm_asked_first.append((message["explain_id"], self.held.asked.is_set()))
        await self.inner.send(data, properties)

    async def close(self) -> None:
        await self.inner.close()


async def test_the_question_provenance_goes_out_beside_the_llm_call_and_ahead_of_the_rest(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    held = HeldExplains(transport, unique)

    def llm(request: TextCompletionRequest) -> str:
        if request.system.startswith("You are a helpful agent"):
            held.asked.set()
        return "Thought: noted\nFinal Answer: Got it."

    async with agent_stack(
        held,  # type: ignore[arg-type]  # the real transport, wrapped
        tmp_path,
        unique,
        script=llm,
        services=("conversation-memory",),
    ) as stack:
        fields = {"conversation_id": "pets", "user": "ada"}
        first = await stack.ask("My tortoise is called Sheldon.", **fields)
        held.asked.clear()
        second = await stack.ask("What is my tortoise called?", **fields)  # memory: the turn
    assert [r.message_type for r in first] == ["explain", "thought", "explain", "answer"]
    # The question, then the memory recalled (the first turn), then the rest, in order.
    kinds = [r.message_type for r in second]
    assert kinds == ["explain", "explain", "thought", "explain", "answer"]
    assert second[1].explain_id.endswith("/memory")
    question_and_memory = [
        asked for uri, asked in held.llm_asked_first if not uri.endswith("/final")
    ]
    assert question_and_memory == [True, True, True]
