"""A follow-up asked the moment an answer arrives sees that answer's turn, however long the
conversation append takes: with ``turn_wait: reply`` the answer goes out once the turn is
stored (beside the trajectory's publish); with ``sent`` (the default) once its append is on
the bus, conversation memory serving the follow-up's read after it. Real broker, agent and
conversation memory; scripted LLM; the append slowed or held to make the race certain."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import agent_stack
from tests.support.memory_services import until

pytestmark = pytest.mark.broker

FIRST = "My tortoise is called Sheldon."


def llm(request: TextCompletionRequest) -> str:
    return "Thought: noted\nFinal Answer: Got it."


async def test_a_follow_up_right_after_the_stored_answer_sees_the_previous_turn(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    services = ("conversation-memory",)
    settings = {"turn_wait": "reply"}  # the answer waits for the turn stored
    async with agent_stack(
        transport, tmp_path, unique, script=llm, services=services, agent_settings=settings
    ) as stack:
        conversations = stack.services["conversation-memory"]
        screen = conversations.pii.screen  # type: ignore[attr-defined]
        appends: list[str] = []

        async def slow_screen(workspace: str, request: Any) -> Any:
            if request.operation == "append":  # a slow append: the follow-up comes first
                appends.append("started")
                # The slowness under test (the race it opens), not a wait for something.
                await asyncio.sleep(0.5)
                screened = await screen(workspace, request)
                appends.append("screened")
                return screened
            return await screen(workspace, request)

        conversations.pii.screen = slow_screen  # type: ignore[attr-defined]
        fields = {"conversation_id": "pets", "user": "ada"}
        first = await stack.ask(FIRST, **fields)
        assert first[-1].content == "Got it."
        assert appends == ["started", "screened"]  # the answer waited for the append
        second = await stack.ask("What is my tortoise called?", **fields)
        assert second[-1].content == "Got it."
        [_, follow_up] = stack.prompts()
        assert FIRST in follow_up


async def test_the_answer_goes_out_once_its_turn_is_sent_and_a_follow_up_still_sees_it(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    """``turn_wait: sent`` (the default): the answer waits for its turn's append to be on
    the bus, not stored; the follow-up's read reaches conversation memory while the append
    is still held in its PII screen, and is served after it (each conversation's operations
    in their order of arrival). Event gates: the append's screen is held until the
    follow-up's read is in line behind it."""
    services = ("conversation-memory",)
    async with agent_stack(transport, tmp_path, unique, script=llm, services=services) as stack:
        conversations = stack.services["conversation-memory"]
        screen = conversations.pii.screen  # type: ignore[attr-defined]
        order = conversations.order  # type: ignore[attr-defined]
        turn = order.turn
        release, in_line = asyncio.Event(), asyncio.Event()
        appends: list[str] = []
        entered: list[str] = []

        async def held_screen(workspace: str, request: Any) -> Any:
            if request.operation == "append":
                appends.append("started")
                await release.wait()  # held until the follow-up's read is in line
                screened = await screen(workspace, request)
                appends.append("screened")
                return screened
            return await screen(workspace, request)

        @contextlib.asynccontextmanager
        async def recorded(scope: Any) -> AsyncIterator[None]:
            entered.append("in line")
            if len(entered) == 3:  # the first recall's get, the append, the follow-up's get
                in_line.set()
            async with turn(scope):
                yield

        conversations.pii.screen = held_screen  # type: ignore[attr-defined]
        order.turn = recorded
        fields = {"conversation_id": "pets", "user": "ada"}
        # The answer comes while its turn is held unstored (waiting for it would hang here).
        first = await asyncio.wait_for(stack.ask(FIRST, **fields), 30)
        assert first[-1].content == "Got it."
        assert appends == ["started"]
        follow_up = asyncio.ensure_future(stack.ask("What is my tortoise called?", **fields))
        await asyncio.wait_for(in_line.wait(), 30)  # its read is in the service, behind
        release.set()
        second = await asyncio.wait_for(follow_up, 30)
        assert second[-1].content == "Got it."
        # The first turn was screened before the follow-up's read; the follow-up's own append
        # may still be in its screen (its answer does not wait for it): wait, it is stored.
        assert appends[:3] == ["started", "screened", "started"]
        await until(lambda: _done(appends), timeout=30)
        [_, prompt] = stack.prompts()
        assert FIRST in prompt


async def _done(appends: list[str]) -> bool:
    return appends == ["started", "screened", "started", "screened"]
