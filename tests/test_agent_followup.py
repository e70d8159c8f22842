"""A follow-up asked the moment an answer arrives sees that answer's turn, however long the
conversation append takes (the answer goes out once the turn is stored, beside the
trajectory's publish). Real broker, agent and conversation memory; scripted LLM; the append
slowed to make the race certain."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import agent_stack

pytestmark = pytest.mark.broker

FIRST = "My tortoise is called Sheldon."


def llm(request: TextCompletionRequest) -> str:
    return "Thought: noted\nFinal Answer: Got it."


async def test_a_follow_up_right_after_the_answer_sees_the_previous_turn(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    services = ("conversation-memory",)
    async with agent_stack(transport, tmp_path, unique, script=llm, services=services) as stack:
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
