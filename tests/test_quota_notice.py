"""Quotas tell the user and are counted (issue 26, finding 9): a turn past the
conversation's cap is not silently dropped (the answer says it was not saved, and
conversation-memory counts the refusal); episodes evicted at the per-user cap are counted.

Real broker (both where installed), real conversation and episode memory; scripted LLM.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.episodes.service import EpisodeMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from tests.support.agent_stack import agent_stack
from tests.support.memory_services import MovableClock, serving, topics
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
