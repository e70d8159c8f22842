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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.schema import TextCompletionRequest
from react_mem.schema.conversations import ConversationRequest, ConversationResponse, QuotaNotice
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from tests.support.agent_stack import agent_stack
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, serving, topics, until
from tests.test_agent_explain import LOOKUP
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
    assert answer.startswith("Noted.") and "1 earlier fact was removed" in answer
    assert "peanut" not in answer.lower()  # the notice says what kind and how many, no words
    assert again[-1].content == "Noted."  # told once
    given = {"processor": conversations, "kind": "fact", "action": "evicted"}
    assert registry.get_sample_value("tg_memory_quota_notices_total", given) == 1
    left = {"processor": learner, "kind": "fact", "action": "evicted", "outcome": "left"}
    assert registry.get_sample_value("tg_memory_learner_quota_notices_total", left) == 1


async def test_a_fact_refused_at_the_collection_quota_is_told_to_its_owner(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    registry = CollectorRegistry()
    learner = f"learner-{unique}"

    def sample(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, {"processor": learner, **labels}) or 0.0

    async def refused() -> bool:
        labels = {"kind": "fact", "action": "refused", "outcome": "left"}
        return sample("tg_memory_learner_quota_notices_total", **labels) >= 1

    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=noted,
        services=("conversation-memory", "fact-memory", "episode-memory"),
        service_settings={"fact-memory": {"max_facts_per_collection": 1}},
        learner=True,
        learner_settings={"judge_fact_changes": False},
        registry=registry,
    ) as stack:
        await stack.ask("Please remember that I row.", user="bob", conversation_id="b")
        await until(lambda: _learned_fact(sample), timeout=60)
        await stack.ask("Please remember that I sing.", user="ada", conversation_id="a")
        await until(refused, timeout=60)
        bob = await stack.ask("Anything new?", user="bob", conversation_id="b")
        ada = await stack.ask("Anything new?", user="ada", conversation_id="a")

    assert bob[-1].content == "Noted."  # the collection is shared; the notice is not
    assert ada[-1].content.endswith(
        "(Your memory is full: 1 fact from an earlier message was not saved.)"
    )


async def _learned_fact(sample: Callable[..., float]) -> bool:
    return sample("tg_memory_learned_total", kind="fact") >= 1


def notice(notice_id: str, count: int = 2) -> QuotaNotice:
    return QuotaNotice(notice_id=notice_id, kind="fact", action="evicted", count=count, ids=["f1"])


async def test_a_notice_is_given_once_to_the_next_answer_of_its_owners_conversation(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with serving(
        ConversationMemoryProcessor,
        ConversationResponse,
        transport,
        pid=f"conversation-memory-{unique}",
        queues={"default": topics("conversation-memory", unique, "default", ("ended",))},
        data_dir=tmp_path / "conversations",
        registry=registry,
        clock=MovableClock(),
        embedder=HashingEmbedder(),
    ) as svc:

        async def ask(operation: Any, **fields: Any) -> ConversationResponse:
            reply = await svc.ask(ConversationRequest(operation=operation, **fields))
            assert reply.error is None, reply.error
            return reply

        def turn(user: str, n: int, take: bool = True) -> dict[str, Any]:
            return {
                "user": user,
                "conversation_id": "c1",
                "session_id": f"{user}-{n}",
                "query": f"q{n}",
                "answer": f"a{n}",
                "take_notices": take,
            }

        # Left before the conversation's first turn lands (the learner can be first).
        for _ in range(2):  # a redelivered notice is kept once
            await ask("notice", user="ada", conversation_id="c1", notice=notice("run-1"))
        error_turn = await ask("append", **turn("ada", 0, take=False))  # an error reply's
        bob = await ask("append", **turn("bob", 1))  # same id, another owner
        first = await ask("append", **turn("ada", 1))
        redelivered = await ask("append", **turn("ada", 1))
        await ask("notice", user="ada", conversation_id="c1", notice=notice("run-1"))  # given
        later = await ask("append", **turn("ada", 2))
        pid = svc.processor.id

    assert error_turn.turn is not None and error_turn.turn.notices == []
    assert bob.turn is not None and bob.turn.notices == []
    assert first.turn is not None and first.turn.notices == [notice("run-1")]
    assert redelivered.created is False and redelivered.turn == first.turn  # a retried answer
    assert later.turn is not None and later.turn.notices == []
    given = {"processor": pid, "kind": "fact", "action": "evicted"}
    assert registry.get_sample_value("tg_memory_quota_notices_total", given) == 1


async def test_an_episode_evicted_at_the_cap_is_told_at_the_next_answer(
    transport: Transport, tmp_path: Path, unique: str
) -> None:
    registry = CollectorRegistry()
    learner = f"learner-{unique}"
    calls = 0

    def looks_up(request: TextCompletionRequest) -> str:
        """Each ask looks something up (a task: an episode), then answers."""
        nonlocal calls
        if request.system.startswith("You are a helpful agent"):
            calls += 1
            if calls % 2:
                return 'Thought: look\nAction: lookup\nArgs: {"question": "the weather"}'
            return "Thought: done\nFinal Answer: Sunny."
        return noted(request)

    async def evicted() -> bool:
        labels = {"kind": "episode", "action": "evicted", "outcome": "left"}
        value = registry.get_sample_value(
            "tg_memory_learner_quota_notices_total", {"processor": learner, **labels}
        )
        return (value or 0) >= 1

    async with agent_stack(
        transport,
        tmp_path,
        unique,
        script=looks_up,
        services=("conversation-memory", "fact-memory", "episode-memory"),
        service_settings={"episode-memory": {"max_episodes_per_scope": 1}},
        tools={"lookup": LOOKUP},
        learner=True,
        learner_settings={"judge_fact_changes": False},
        registry=registry,
    ) as stack:
        for question in ("Weather today?", "Weather tomorrow?"):
            reply = await stack.ask(question, user="ada", conversation_id="e")
            assert reply[-1].content == "Sunny."
        await until(evicted, timeout=60)
        told = await stack.ask("Weather on Sunday?", user="ada", conversation_id="e")

    assert (
        told[-1].content
        == "Sunny.\n\n(Your memory was full, so 1 older episode was removed to make room.)"
    )
