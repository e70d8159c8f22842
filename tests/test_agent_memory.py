"""Memory across conversations, end to end: agent -> trajectory -> learner -> fact memory ->
the next conversation's prompt. Real broker, services, store and embedder; scripted LLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import TextCompletionRequest
from tests.support.agent_stack import Stack, agent_stack, facts_of
from tests.support.memory_services import until

pytestmark = pytest.mark.broker

FACT = "Ada is allergic to peanuts."


def llm(request: TextCompletionRequest) -> str:
    """Agent prompts: answer from memory when it is there. Learner prompts: JSON."""
    if request.system.startswith("You are a helpful agent"):
        if FACT in request.prompt:
            return "Thought: memory says peanuts are out\nFinal Answer: Avoid peanuts; an apple."
        return "Thought: nothing known\nFinal Answer: Noted."
    if "curate the long-term memory" in request.system:
        return json.dumps({"facts": [{"content": FACT, "importance": 0.8}]})
    if "running summary" in request.system:
        return json.dumps({"summary": "Ada told the agent about her peanut allergy."})
    return json.dumps({"lessons": []})


async def test_a_fact_told_in_one_conversation_is_used_in_another(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with agent_stack(transport, tmp_path, unique, script=llm, learner=True) as stack:
        first = await stack.ask(
            "Hi, I am Ada. I have a peanut allergy.", conversation_id="a", user="ada"
        )
        assert first[-1].content == "Noted."
        await until(lambda: _has(stack, "ada"), timeout=60)

        second = await stack.ask("Can you suggest a snack?", conversation_id="b", user="ada")
        prompt_b = stack.prompts()[-1]
        other = await stack.ask("Can you suggest a snack?", conversation_id="c", user="bob")
        prompt_other = stack.prompts()[-1]

    assert "<memory>" in prompt_b and FACT in prompt_b
    assert second[-1].content == "Avoid peanuts; an apple."
    # Another user's conversation does not see Ada's fact.
    assert FACT not in prompt_other and other[-1].content == "Noted."


async def _has(stack: Stack, user: str) -> bool:
    return FACT in await facts_of(stack, user)
