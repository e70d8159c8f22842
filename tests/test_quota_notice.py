"""Quotas tell the user and are counted (issue 26, finding 9): a turn past the
conversation's cap is not silently dropped (the answer says it was not saved, and
conversation-memory counts the refusal); episodes evicted at the per-user cap are counted;
a fact the learner evicts at the user's quota after an answer is told by the user's next
answer in that conversation, once, and counted.

Real broker (both where installed), real conversation and episode memory; scripted LLM.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.episodes.service import EpisodeMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.schema import TextCompletionRequest
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from tests.support.agent_stack import agent_stack
from tests.support.memory_services import MovableClock, serving, topics, until
from tests.test_agent_playbook import answer_at_once

pytestmark = pytest.mark.broker


async def test_a_turn_past_the_conversation_cap_is_told_and_counted(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    registry = CollectorRegistry()
    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=answer_at_once,
        services=("conversation-memory",),
        service_settings={"conversation-memory": {"max_turns_per_conversation": 1}},
        registry=registry,
    ) as stack:
        first = await stack.ask("Remember that I like tea.", user="ada", conversation_id="c1")
        second = await stack.ask("And coffee too.", user="ada", conversation_id="c1")
        service = stack.services["conversation-memory"].id
    assert first[-1].content == "42"
    assert second[-1].message_type == "answer"
    assert second[-1].content.startswith("42") and "not saved" in second[-1].content
    refused = registry.get_sample_value(
        "tg_memory_quota_refusals_total",
        {"processor": service, "kind": "turn", "quota": "conversation"},
    )
    assert refused == 1


async def test_episodes_evicted_at_the_cap_are_counted(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with serving(
        EpisodeMemoryProcessor,
        EpisodeResponse,
        transport,
        pid=f"episode-memory-{unique}",
        queues={"ws": topics("episode-memory", unique, "ws")},
        data_dir=tmp_path / "episodes",
        registry=registry,
        clock=MovableClock(),
        max_episodes_per_scope=2,
        metrics=False,
    ) as svc:
        evicted = 0
        for n in range(6):
            reply = await svc.ask(
                EpisodeRequest(
                    operation="store",
                    user="ada",
                    session_id=f"s{n}",
                    goal=f"goal {n}",
                    outcome="success",
                ),
                "ws",
            )
            assert reply.error is None
            evicted += reply.evicted or 0
        pid = svc.processor.id
    assert evicted >= 1
    counted = registry.get_sample_value(
        "tg_memory_quota_evictions_total", {"processor": pid, "kind": "episode"}
    )
    assert counted == evicted


def noted(request: TextCompletionRequest) -> str:
    """The agent answers at once; the learner extracts no facts beyond those asked for in
    so many words (found without the LLM) and writes a plain summary."""
    if request.system.startswith("You are a helpful agent"):
        return "Thought: easy\nFinal Answer: Noted."
    if "curate the long-term memory" in request.system:
        return json.dumps({"facts": []})
    if "running summary" in request.system:
        return json.dumps({"summary": "The user asked the agent to remember things."})
    return json.dumps({"lessons": []})


async def test_a_fact_evicted_at_the_user_quota_is_told_once_in_that_conversation_only(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    registry = CollectorRegistry()

    def sample(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    learner = f"learner-{unique}"

    async def learned(count: int) -> bool:
        return sample("tg_memory_learned_total", processor=learner, kind="fact") >= count

    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=noted,
        services=("conversation-memory", "fact-memory", "episode-memory"),
        service_settings={"fact-memory": {"max_facts_per_scope": 2}},
        learner=True,
        learner_settings={"judge_fact_changes": False},
        registry=registry,
    ) as stack:
        said = [
            "Please remember that I am allergic to peanuts.",
            "Please remember that I live in Oslo.",
            "Please remember that I play the cello.",  # the quota: the oldest fact goes
        ]
        for n, question in enumerate(said, 1):
            reply = await stack.ask(question, user="ada", conversation_id="c1")
            assert reply[-1].content == "Noted."  # nothing was evicted before this answer
            await until(functools.partial(learned, n), timeout=60)
        assert sample("tg_memory_learner_evicted_total", processor=learner, kind="fact") == 1

        # Same conversation id, another owner; the same owner, another conversation.
        bob = await stack.ask("Anything new?", user="bob", conversation_id="c1")
        elsewhere = await stack.ask("Anything new?", user="ada", conversation_id="c2")
        told = await stack.ask("Anything new?", user="ada", conversation_id="c1")
        again = await stack.ask("And now?", user="ada", conversation_id="c1")
        conversations = stack.services["conversation-memory"].id

    assert bob[-1].content == "Noted." and elsewhere[-1].content == "Noted."
    answer = told[-1].content
    assert answer.startswith("Noted.") and "1 fact of the oldest" in answer and "removed" in answer
    assert "peanut" not in answer.lower()  # the notice says what kind and how many, no words
    assert again[-1].content == "Noted."  # told once
    given = {"processor": conversations, "kind": "fact", "action": "evicted"}
    assert registry.get_sample_value("tg_memory_quota_notices_total", given) == 1
    left = {"processor": learner, "kind": "fact", "action": "evicted", "outcome": "left"}
    assert registry.get_sample_value("tg_memory_learner_quota_notices_total", left) == 1
