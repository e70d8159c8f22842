"""Retention that is not "forever" (issue 13): ended conversations, episodes and facts expire
by the service's default or the workspace's agent-mem setting, applied by the services'
sweepers, over the real broker and store, on the services' movable clocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from memory_services.store.base import Scope
from react_mem.bus.pulsar import PulsarTransport
from react_mem.errors import ConfigurationError
from react_mem.retention import WorkspaceRetention, parse_days
from react_mem.schema.conversations import ConversationRequest, ConversationResponse
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import START, MovableClock, serving, topics

DAY = 86400.0
#: ``short`` keeps each kind one day, ``forever`` never expires it, ``default`` has the
#: service's default.
WORKSPACES = ("default", "short", "forever")


def agent_mem(key: str) -> dict[str, dict[str, Any]]:
    return {"short": {"agent-mem": {key: "1"}}, "forever": {"agent-mem": {key: "forever"}}}


# -- the setting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30", 30 * DAY),
        (0.5, DAY / 2),
        (7, 7 * DAY),
        ("forever", None),
        ("never", None),
        (None, None),
    ],
)
def test_days_parse_to_seconds_or_forever(value: object, seconds: float | None) -> None:
    assert parse_days("episode-retention-days", value) == seconds


@pytest.mark.parametrize("value", ["0", "-3", "soon", True, "nan", [1]])
def test_a_bad_value_names_the_key_and_the_value(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"episode-retention-days .*days or forever"):
        parse_days("episode-retention-days", value)


async def test_a_workspace_overrides_the_default_and_a_bad_value_keeps_the_previous() -> None:
    retention = WorkspaceRetention("p", "fact-ttl-days", 90)
    await retention.on_config("ws", {"agent-mem": {"fact-ttl-days": "2"}}, 1)
    assert retention.seconds("ws") == 2 * DAY
    await retention.on_config("ws", {"agent-mem": {"fact-ttl-days": "zero"}}, 2)
    assert retention.seconds("ws") == 2 * DAY
    await retention.on_config("ws", {"agent-mem": {}}, 3)
    assert retention.seconds("ws") == retention.seconds("other") == 90 * DAY


# -- conversations -----------------------------------------------------------------------


async def _conversation(service: Any, workspace: str, conversation: str, *, end: bool) -> None:
    append = ConversationRequest(
        operation="append", conversation_id=conversation, query="q", answer="a"
    )
    assert (await service.ask(append, workspace)).error is None
    if end:
        ended = ConversationRequest(operation="end", conversation_id=conversation)
        assert (await service.ask(ended, workspace)).error is None


async def _conversations(service: Any, workspace: str) -> set[str]:
    found = await service.ask(ConversationRequest(operation="list", limit=100), workspace)
    assert found.error is None
    return {c.conversation_id for c in found.conversations}


async def _turns_held(service: Any, workspace: str) -> int:
    processor = service.processor
    scope = Scope(workspace, "default")
    return int(await processor.store.count(processor.memory.memory.collection, scope=scope))


async def test_ended_conversations_are_deleted_after_the_retention_open_ones_are_kept(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with serving(
        ConversationMemoryProcessor,
        ConversationResponse,
        transport,
        pid=f"conversation-memory-{unique}",
        queues={ws: topics("conversation-memory", unique, ws, ("ended",)) for ws in WORKSPACES},
        data_dir=tmp_path / "conversations",
        registry=registry,
        clock=clock,
        embedder=HashingEmbedder(),
        config=agent_mem("conversation-retention-days"),
        idle_timeout=None,
        sweep_interval=3600,
    ) as service:
        for workspace in WORKSPACES:
            await _conversation(service, workspace, "ended", end=True)
            await _conversation(service, workspace, "open", end=False)
        clock.advance(2 * DAY)
        await service.processor.sweep(service.processor.memory)
        # One day in "short": its ended conversation (header and turn) is gone.
        assert await _conversations(service, "short") == {"open"}
        assert await _turns_held(service, "short") == 2  # the open one's header and turn
        assert await _conversations(service, "default") == {"ended", "open"}

        clock.advance(89 * DAY)  # 91 days: past the default of 90
        await service.processor.sweep(service.processor.memory)
        assert await _conversations(service, "default") == {"open"}
        assert await _conversations(service, "forever") == {"ended", "open"}
        assert await _conversations(service, "short") == {"open"}


async def test_a_conversation_reopened_by_a_turn_is_not_expired(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with serving(
        ConversationMemoryProcessor,
        ConversationResponse,
        transport,
        pid=f"conversation-memory-{unique}",
        queues={"short": topics("conversation-memory", unique, "short", ("ended",))},
        data_dir=tmp_path / "conversations",
        registry=registry,
        clock=clock,
        embedder=HashingEmbedder(),
        config=agent_mem("conversation-retention-days"),
        idle_timeout=None,
        sweep_interval=3600,
    ) as service:
        await _conversation(service, "short", "c1", end=True)
        clock.advance(2 * DAY)
        await _conversation(service, "short", "c1", end=False)  # reopens it
        await service.processor.sweep(service.processor.memory)
        assert await _conversations(service, "short") == {"c1"}


# -- episodes -----------------------------------------------------------------------------


async def test_episodes_expire_after_180_days_by_default_or_the_workspace_setting(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with serving(
        EpisodeMemoryProcessor,
        EpisodeResponse,
        transport,
        pid=f"episode-memory-{unique}",
        queues={ws: topics("episode-memory", unique, ws) for ws in WORKSPACES},
        data_dir=tmp_path / "episodes",
        registry=registry,
        clock=clock,
        embedder=HashingEmbedder(),
        config=agent_mem("episode-retention-days"),
        sweep_interval=3600,
    ) as service:
        store = EpisodeRequest(operation="store", goal="renew the certificate", outcome="success")
        for workspace in WORKSPACES:
            assert (await service.ask(store, workspace)).error is None

        async def listed(workspace: str) -> int:
            found = await service.ask(EpisodeRequest(operation="list"), workspace)
            assert found.error is None
            return len(found.episodes)

        async def held(workspace: str) -> int:
            p = service.processor
            return int(await p.store.count(p.memory.collection, scope=Scope(workspace, "default")))

        clock.advance(2 * DAY)
        assert [await listed(ws) for ws in WORKSPACES] == [1, 0, 1]
        await service.processor.sweep(service.processor.memory)
        assert [await held(ws) for ws in WORKSPACES] == [1, 0, 1]

        clock.advance(179 * DAY)  # 181 days
        assert [await listed(ws) for ws in WORKSPACES] == [0, 0, 1]
        await service.processor.sweep(service.processor.memory)
        assert [await held(ws) for ws in WORKSPACES] == [0, 0, 1]


# -- facts --------------------------------------------------------------------------------


async def test_facts_take_the_workspace_ttl_unless_they_carry_their_own(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with serving(
        FactMemoryProcessor,
        FactResponse,
        transport,
        pid=f"fact-memory-{unique}",
        queues={ws: topics("fact-memory", unique, ws) for ws in WORKSPACES},
        data_dir=tmp_path / "facts",
        registry=registry,
        clock=clock,
        embedder=HashingEmbedder(),
        config=agent_mem("fact-ttl-days"),
        sweep_interval=3600,
    ) as service:
        facts = [
            FactInput(content="The office plant is a ficus."),
            FactInput(content="The badge reader is on floor two.", ttl_seconds=10 * DAY),
        ]
        for workspace in WORKSPACES:
            stored = await service.ask(FactRequest(operation="store", facts=facts), workspace)
            assert stored.error is None

        async def listed(workspace: str) -> list[str]:
            found = await service.ask(FactRequest(operation="list"), workspace)
            assert found.error is None
            return sorted(f.content for f in found.facts)

        clock.advance(2 * DAY)
        # No default TTL: facts are kept; "short" gives facts without their own TTL one day.
        assert await listed("default") == sorted(f.content for f in facts)
        assert await listed("short") == ["The badge reader is on floor two."]
        assert await listed("forever") == sorted(f.content for f in facts)


# -- the learner's ledger ------------------------------------------------------------------


async def test_the_ledger_prunes_each_workspace_by_its_own_retention(tmp_path: Path) -> None:
    from react_mem.learner.ledger import TrajectoryLedger

    now = [START]
    retention = WorkspaceRetention("memory-learner", "ledger-retention-days", 7)
    await retention.on_config("short", {"agent-mem": {"ledger-retention-days": "1"}}, 1)
    await retention.on_config("forever", {"agent-mem": {"ledger-retention-days": "forever"}}, 1)

    async def held() -> list[str]:
        ledger = TrajectoryLedger(
            tmp_path / "l.sqlite3",
            retention=7 * DAY,
            clock=lambda: now[0],
            overrides=retention.overrides,
        )
        await ledger.open()  # prunes
        try:
            found = []
            for ws in WORKSPACES:
                entry, body = await ledger.get(ws, "k"), await ledger.trajectory(ws, "s")
                if entry is not None and body is not None:
                    found.append(ws)
                else:
                    assert entry is None and body is None, ws  # one retention for both
            return found
        finally:
            await ledger.close()

    writer = TrajectoryLedger(tmp_path / "l.sqlite3", retention=7 * DAY, clock=lambda: now[0])
    await writer.open()
    for ws in WORKSPACES:
        await writer.save_plan(ws, "k", {})
        await writer.save_trajectory(ws, "s", "{}")
    await writer.close()

    now[0] += 2 * DAY
    assert await held() == ["default", "forever"]
    now[0] += 6 * DAY  # 8 days: past the default of 7
    assert await held() == ["forever"]


async def test_a_ledger_with_a_short_retention_prunes_within_it_not_hourly(
    tmp_path: Path,
) -> None:
    """Pruned 24 times per retention where that is under an hour: a record kept for four
    minutes is gone soon after them, not an hour later."""
    from react_mem.learner.ledger import TrajectoryLedger

    now = [START]
    ledger = TrajectoryLedger(tmp_path / "l.sqlite3", retention=240, clock=lambda: now[0])
    await ledger.open()
    try:
        await ledger.save_plan("default", "old", {})
        now[0] += 250  # past the retention; the next write prunes
        await ledger.save_plan("default", "new", {})
        assert await ledger.get("default", "old") is None
        assert await ledger.get("default", "new") is not None
    finally:
        await ledger.close()
