"""The answer's last two messages, the conclusion's provenance and the answer, go out one
behind the other without the answer waiting for the broker's receipt of the conclusion
(one producer sends them in order), and the caller sees the same stream as before. Real
broker, agent and conversation memory; scripted LLM; the agent's response producer wrapped
so the conclusion's receipt is held until the answer is queued (which an agent that waits
for each receipt in turn never does: it would wait out the bound)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer, Receipt, Transport, send_queued
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import agent_stack

pytestmark = pytest.mark.broker

#: How long the conclusion's receipt is held for the answer to be queued behind it.
BOUND = 10.0


class HeldConclusion:
    """The real transport; on the agent's response queue the receipt of the conclusion's
    ``explain`` (``…/final``) is held (at most ``BOUND``) until the answer is queued."""

    def __init__(self, inner: Transport, unique: str) -> None:
        self.inner, self.responses = inner, f"response:tg:agent-{unique}"
        self.answer_queued = asyncio.Event()
        #: Whether the answer was queued while the conclusion's receipt was still held.
        self.answer_behind_held_conclusion: list[bool] = []
        self.conclusion_held = False

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
    def __init__(self, held: HeldConclusion, inner: Producer) -> None:
        self.held, self.inner = held, inner

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        await (await self.send_queued(data, properties))

    async def send_queued(self, data: bytes, properties: dict[str, str]) -> Receipt:
        message = json.loads(data)
        receipt = await send_queued(self.inner, data, properties)
        if message["message_type"] == "answer":
            self.held.answer_behind_held_conclusion.append(self.held.conclusion_held)
            self.held.answer_queued.set()
        if message["message_type"] == "explain" and message["explain_id"].endswith("/final"):
            self.held.conclusion_held = True
            return asyncio.ensure_future(self._hold(receipt))
        return receipt

    async def _hold(self, receipt: Receipt) -> None:
        try:
            await asyncio.wait_for(self.held.answer_queued.wait(), BOUND)
        except TimeoutError:
            pass
        finally:
            self.held.conclusion_held = False
        await receipt

    async def close(self) -> None:
        await self.inner.close()


def llm(request: TextCompletionRequest) -> str:
    return "Thought: noted\nFinal Answer: Got it."


async def test_the_answer_is_queued_behind_its_conclusion_without_waiting_for_its_receipt(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    held = HeldConclusion(transport, unique)
    async with agent_stack(
        held,  # type: ignore[arg-type]  # the real transport, wrapped
        tmp_path,
        unique,
        script=llm,
        services=("conversation-memory",),
    ) as stack:
        fields = {"conversation_id": "pets", "user": "ada"}
        first = await stack.ask("My tortoise is called Sheldon.", **fields)
        held.answer_queued.clear()
        second = await stack.ask("What is my tortoise called?", **fields)
    assert held.answer_behind_held_conclusion == [True, True]
    assert [r.message_type for r in first] == ["explain", "thought", "explain", "answer"]
    kinds = [r.message_type for r in second]
    assert kinds == ["explain", "explain", "thought", "explain", "answer"]
    assert second[3].explain_id.endswith("/final") and second[4].content == "Got it."
