"""The readiness probe of `react-mem up` and the demo: the real agent answers it at once,
with no model call and nothing written to memory (an empty question would run, as in
agent-manager, and cost a generation on a local model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import AgentResponse, TextCompletionRequest
from react_mem.stack import agent_probe, probe
from tests.support.agent_stack import agent_stack

pytestmark = pytest.mark.broker


def answer(request: TextCompletionRequest) -> str:
    return "Thought: easy\nFinal Answer: hello"


async def test_the_agent_probe_costs_no_model_call(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(transport, tmp_path, unique, script=answer, services=()) as stack:
        said: list[str] = []
        await probe(
            transport,
            stack.topics["agent"]["request"],
            stack.topics["agent"]["response"],
            AgentResponse,
            agent_probe(),
            deadline=30,
            say=said.append,
            what="the agent",
        )
        assert stack.llm.requests == []

        # The probe's reason to exist: a plain question (empty or not) costs a generation.
        # It is also the barrier: a model call the probe made would have gone out before
        # the probe's answer, so ahead of this question's, and be counted here too.
        await stack.ask("")
        assert len(stack.llm.requests) == 1
