"""A turn no answer waits for (``turn_wait: sent``) is not lost when its append fails: a
transient failure is sent again and the turn stored once; a turn that every attempt fails
is counted (``tg_agent_turn_not_stored_total``). Real broker, agent and conversation
memory; conversation memory's screen refuses the append for a full disk (a transient
error, answered at once)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.errors import DiskFull
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import agent_stack
from tests.support.recording import eventually

pytestmark = pytest.mark.broker


def llm(request: TextCompletionRequest) -> str:
    return "Thought: noted\nFinal Answer: Got it."


@pytest.mark.parametrize("failures", [1, 3])
async def test_a_failed_append_is_sent_again_or_counted(
    transport: PulsarTransport, tmp_path: Path, unique: str, failures: int
) -> None:
    registry = CollectorRegistry()
    services = ("conversation-memory",)
    async with agent_stack(
        transport, tmp_path, unique, script=llm, services=services, registry=registry
    ) as stack:
        conversations = stack.services["conversation-memory"]
        screen = conversations.pii.screen  # type: ignore[attr-defined]
        attempts: list[str] = []

        async def failing_screen(workspace: str, request: Any) -> Any:
            if request.operation == "append":
                attempts.append(request.turn_id)
                if len(attempts) <= failures:
                    raise DiskFull("no room (test)")
            return await screen(workspace, request)

        conversations.pii.screen = failing_screen  # type: ignore[attr-defined]
        fields = {"conversation_id": "pets", "user": "ada"}
        answer = await stack.ask("My tortoise is called Sheldon.", **fields)
        assert answer[-1].content == "Got it."  # the answer did not wait for the stored turn
        lost = "tg_agent_turn_not_stored_total"

        await eventually(lambda: len(attempts) >= min(failures + 1, 3), timeout=30)
        if failures >= 3:  # every attempt failed: counted
            await eventually(
                lambda: (registry.get_sample_value(lost, {"processor": stack.agent.id}) or 0) == 1,
                timeout=30,
            )
            return
        read = await stack.ask("What is my tortoise called?", **fields)
        assert read[-1].content == "Got it."
        [_, follow_up] = stack.prompts()
        assert "My tortoise is called Sheldon." in follow_up  # stored by the second attempt
        assert (registry.get_sample_value(lost, {"processor": stack.agent.id}) or 0) == 0
        assert len(set(attempts[:2])) == 1  # one turn, sent twice
