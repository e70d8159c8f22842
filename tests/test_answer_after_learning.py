"""An answered "remember that ..." is never lost (issue 26, finding 5): the agent publishes
the trajectory before it sends the answer, and one it cannot publish holds the answer back
(the iteration is retried, then answered with an error) instead of being only logged.

Real broker (both where installed), real conversation memory; the trajectory queue's
producer fails on demand through a wrapper around the real transport.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer, Producer, Transport
from react_mem.errors import BusError
from tests.support.agent_stack import agent_stack, trajectory_queue
from tests.test_agent_playbook import answer_at_once, next_trajectory, trajectories

pytestmark = pytest.mark.broker


class Sends:
    """The real transport; every send is logged in order, and sends on ``failing`` fail
    while ``fail`` is set."""

    def __init__(self, inner: Transport, failing: str) -> None:
        self.inner, self.failing = inner, failing
        self.fail = False
        self.log: list[tuple[str, bytes]] = []

    async def connect(self) -> None:
        await self.inner.connect()

    async def producer(self, queue: Queue) -> Producer:
        return _Producer(self, queue.id, await self.inner.producer(queue))

    async def consumer(
        self, queue: Queue, subscription: str, *, from_earliest: bool = False
    ) -> Consumer:
        return await self.inner.consumer(queue, subscription, from_earliest=from_earliest)

    async def close(self) -> None:
        """The inner transport is the fixture's to close."""


class _Producer:
    def __init__(self, sends: Sends, queue: str, inner: Producer) -> None:
        self.sends, self.queue, self.inner = sends, queue, inner

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        if self.queue == self.sends.failing and self.sends.fail:
            raise BusError(f"send to {self.queue} failed: injected")
        await self.inner.send(data, properties)
        self.sends.log.append((self.queue, data))

    async def close(self) -> None:
        await self.inner.close()


def kinds(sends: Sends, unique: str) -> list[str]:
    """What was sent, in order: "trajectory", or a response's message type."""
    out = []
    for queue, data in sends.log:
        if queue == trajectory_queue(unique):
            out.append("trajectory")
        elif queue.startswith(f"response:tg:agent-{unique}"):
            out.append(json.loads(data)["message_type"])
    return out


SETTINGS: dict[str, Any] = {"max_redeliveries": 1, "retry_delay": 0.05}


async def test_the_trajectory_is_published_before_the_answer_is_sent(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    sends = Sends(transport, trajectory_queue(unique))
    async with (
        trajectories(transport, unique) as recorded,
        agent_stack(
            sends,  # type: ignore[arg-type]  # the real transport, wrapped
            tmp_path,
            unique,
            script=answer_at_once,
            services=("conversation-memory",),
            trajectories=True,
            agent_settings=SETTINGS,
        ) as stack,
    ):
        replies = await stack.ask(
            "Remember that my locker code is on the blue card", user="ada", conversation_id="c1"
        )
        record = await next_trajectory(recorded)
    assert replies[-1].message_type == "answer" and replies[-1].content == "42"
    assert record.answer == "42" and record.user == "ada"
    sent = kinds(sends, unique)
    assert "trajectory" in sent and "answer" in sent
    assert sent.index("trajectory") < sent.index("answer"), sent


async def test_an_unpublishable_trajectory_holds_the_answer_back(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    sends = Sends(transport, trajectory_queue(unique))
    sends.fail = True
    async with agent_stack(
        sends,  # type: ignore[arg-type]  # the real transport, wrapped
        tmp_path,
        unique,
        script=answer_at_once,
        services=("conversation-memory",),
        trajectories=True,
        agent_settings=SETTINGS,
    ) as stack:
        replies = await stack.ask("Remember that I park on level 3", user="ada")
    assert "answer" not in {r.message_type for r in replies}
    final = replies[-1]
    assert final.message_type == "error" and final.end_of_dialog
    assert final.error is not None and "not published" in final.error.message
