"""A final reply's conclusion goes out beside its learning hand-off: the thought and the
conclusion's provenance event are sent while the trajectory is being published, and only
the answer waits for the trajectory (issue 26: never an answer whose learning was lost).
What the conclusion stores (its triples on the explainability queue, the answer document)
is stored only with the answer: nothing of an answer not given. Real broker, agent and
conversation memory; scripted LLM; the agent's trajectory producer wrapped to hold or fail
its sends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer, Transport
from react_mem.errors import BusError
from react_mem.schema import TextCompletionRequest
from react_mem.schema.services import Triples
from tests.support.agent_stack import agent_stack, trajectory_queue

pytestmark = pytest.mark.broker

#: How long a trajectory's send waits for the conclusion's event before it goes anyway.
BOUND = 10.0
SETTINGS = {"max_redeliveries": 1, "retry_delay": 0.05}


class Watched:
    """The real transport. The agent's trajectory sends wait (at most ``BOUND``) for the
    conclusion's event to be sent on its response queue, noting whether it was, or fail
    while ``fail`` is set; every send is logged in order."""

    def __init__(self, inner: Transport, unique: str) -> None:
        self.inner, self.unique = inner, unique
        self.concluded = asyncio.Event()
        self.fail = False
        #: Per trajectory send: whether the conclusion's event had been sent by then.
        self.conclusion_first: list[bool] = []
        self.log: list[str] = []

    async def connect(self) -> None:
        await self.inner.connect()

    async def producer(self, queue: Queue) -> Producer:
        inner = await self.inner.producer(queue)
        if queue.id == trajectory_queue(self.unique):
            return _Trajectories(self, inner)
        if queue.id.startswith(f"response:tg:agent-{self.unique}"):
            return _Responses(self, inner)
        return inner

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> Consumer:
        return await self.inner.consumer(queue, subscription, from_earliest=from_earliest)

    async def close(self) -> None:
        """The inner transport is the fixture's to close."""


class _Trajectories:
    def __init__(self, watched: Watched, inner: Producer) -> None:
        self.watched, self.inner = watched, inner

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        if self.watched.fail:
            raise BusError("send to the trajectory queue failed: injected")
        try:
            await asyncio.wait_for(self.watched.concluded.wait(), BOUND)
        except TimeoutError:
            pass
        self.watched.conclusion_first.append(self.watched.concluded.is_set())
        await self.inner.send(data, properties)
        self.watched.log.append("trajectory")

    async def close(self) -> None:
        await self.inner.close()


class _Responses:
    def __init__(self, watched: Watched, inner: Producer) -> None:
        self.watched, self.inner = watched, inner

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        message = json.loads(data)
        await self.inner.send(data, properties)
        kind = message["message_type"]
        if kind == "explain" and message["explain_id"].endswith("/final"):
            kind = "conclusion"
            self.watched.concluded.set()
        self.watched.log.append(kind)

    async def close(self) -> None:
        await self.inner.close()


def llm(request: TextCompletionRequest) -> str:
    return "Thought: noted\nFinal Answer: Got it."


async def test_the_conclusion_goes_out_beside_the_trajectory_and_the_answer_after_it(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    watched = Watched(transport, unique)
    async with agent_stack(
        watched,  # type: ignore[arg-type]  # the real transport, wrapped
        tmp_path,
        unique,
        script=llm,
        services=("conversation-memory",),
        trajectories=True,
    ) as stack:
        fields = {"conversation_id": "pets", "user": "ada"}
        first = await stack.ask("My tortoise is called Sheldon.", **fields)
        watched.concluded.clear()
        second = await stack.ask("What is my tortoise called?", **fields)
    assert watched.conclusion_first == [True, True]
    assert [r.message_type for r in first] == ["explain", "thought", "explain", "answer"]
    kinds = [r.message_type for r in second]
    assert kinds == ["explain", "explain", "thought", "explain", "answer"]
    assert second[3].explain_id.endswith("/final") and second[4].content == "Got it."
    # Each answer after its trajectory; the thought and the conclusion before both.
    ask = ["thought", "conclusion", "trajectory", "answer"]
    assert [k for k in watched.log if k in ask] == ask + ask


async def test_nothing_of_a_conclusion_is_stored_when_its_answer_is_not_given(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    watched = Watched(transport, unique)
    watched.fail = True  # every trajectory send fails: the answer is held back
    explainability = f"flow:tg:explainability-{unique}:default:f1"
    store = await transport.consumer(Queue.parse(explainability), f"store-{unique}")
    try:
        async with agent_stack(
            watched,  # type: ignore[arg-type]  # the real transport, wrapped
            tmp_path,
            unique,
            script=llm,
            services=("conversation-memory",),
            trajectories=True,
            agent_settings=SETTINGS,
            agent_topics={"explainability": explainability},
        ) as stack:
            held = await stack.ask("Remember that I park on level 3", session_id="held")
            watched.fail = False
            given = await stack.ask("Remember that I park on level 4", session_id="given")
            assert given[-1].message_type == "answer"
            # The given answer's conclusion is the last provenance of both asks stored.
            stored: list[str] = []
            while not stored or not stored[-1].endswith("given/final"):
                delivery = await asyncio.wait_for(store.receive(), 30)
                await store.ack(delivery)
                stored.append(Triples.decode(delivery.data).metadata.id)
    finally:
        await store.close()
    assert "answer" not in {r.message_type for r in held}
    assert held[-1].message_type == "error"
    # The caller was told of the held answer's conclusion (beside its learning) ...
    assert any((r.explain_id or "").endswith("held/final") for r in held)
    # ... but it was never stored: only the given answer's was.
    assert [uri for uri in stored if uri.endswith("/final")] == [stored[-1]]
    assert any(uri.endswith("held") for uri in stored)  # the held ask's question was
