"""conversation-memory over the real broker and the embedded Qdrant store; MiniLM where
search is tested, a hashed bag of words elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.lifecycle import ConversationLifecycle
from memory_services.conversations.service import (
    ConversationMemoryProcessor,
    ConversationMemorySettings,
)
from memory_services.store.base import Scope
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer
from react_mem.embedding.base import Embedder
from react_mem.embedding.shared import shared_embedder
from react_mem.schema.conversations import (
    ConversationEnded,
    ConversationRequest,
    ConversationResponse,
    ConversationTurn,
)
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import (
    MovableClock,
    Raw,
    Running,
    after_sweeps,
    serving,
    topics,
    until,
)
from tests.support.recording import eventually

pytestmark = pytest.mark.broker

Service = Running[ConversationMemoryProcessor, ConversationRequest, ConversationResponse]


@contextlib.asynccontextmanager
async def conversation_service(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    *,
    clock: MovableClock | None = None,
    cls: type[ConversationMemoryProcessor] = ConversationMemoryProcessor,
    embedder: Embedder | None = None,
    **settings: Any,
) -> AsyncIterator[Service]:
    """``embedder``: default a hashed bag of words; the real model where search is tested."""
    async with serving(
        cls,
        ConversationResponse,
        transport,
        pid=f"conversation-memory-{unique}",
        queues={"default": topics("conversation-memory", unique, "default", ("ended",))},
        data_dir=tmp_path / "conversations",
        registry=registry,
        clock=clock or MovableClock(),
        embedder=embedder or HashingEmbedder(),
        **settings,
    ) as running:
        yield running


@contextlib.asynccontextmanager
async def ended_events(transport: PulsarTransport, unique: str) -> AsyncIterator[Consumer]:
    """A subscriber to the service's persistent conversation-ended queue, from its start."""
    queue = Queue.parse(topics("conversation-memory", unique, "default", ("ended",))["ended"])
    consumer = await transport.consumer(queue, "learner", from_earliest=True)
    try:
        yield consumer
    finally:
        await consumer.close()


async def next_event(consumer: Consumer, timeout: float = 10.0) -> ConversationEnded:
    delivery = await asyncio.wait_for(consumer.receive(), timeout)
    await consumer.ack(delivery)
    return ConversationEnded.decode(delivery.data)


def append(conversation: str, n: int, **fields: Any) -> ConversationRequest:
    values: dict[str, Any] = {
        "operation": "append",
        "conversation_id": conversation,
        "session_id": f"{conversation}-s{n}",
        "query": f"question {n} about the garden",
        "answer": f"answer {n}: water the roses",
        "summary": f"turn {n} summary",
        "result": "success",
    }
    return ConversationRequest(**(values | fields))


async def ok(service: Service, request: ConversationRequest) -> ConversationResponse:
    response = await service.ask(request)
    assert response.error is None, response.error
    return response


async def get(service: Service, conversation: str, **fields: Any) -> ConversationResponse:
    return await ok(
        service, ConversationRequest(operation="get", conversation_id=conversation, **fields)
    )


async def test_append_then_get_in_order_and_redelivery_does_not_duplicate(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with conversation_service(transport, registry, tmp_path, unique, clock=clock) as service:
        for n in range(4):
            clock.advance(5)
            response = await ok(service, append("c1", n))
            assert response.created is True and response.turn is not None
            assert response.turn.sequence == n
        again = await ok(service, append("c1", 2))  # redelivered: same session id
        assert again.created is False and again.turn is not None and again.turn.sequence == 2
        given = await ok(service, append("c1", 9, turn_id="explicit-turn"))
        assert given.turn is not None and given.turn.turn_id == "explicit-turn"

        conversation = (await get(service, "c1")).conversation
        assert conversation is not None
        assert [t.query for t in conversation.turns] == [
            f"question {n} about the garden" for n in (0, 1, 2, 3, 9)
        ]
        assert [t.sequence for t in conversation.turns] == [0, 1, 2, 3, 4]
        assert conversation.turn_count == 5 and not conversation.ended
        first = conversation.turns[0]
        assert (first.answer, first.summary, first.result) == (
            "answer 0: water the roses",
            "turn 0 summary",
            "success",
        )
        assert first.time == pytest.approx(clock.now - 20)
        assert first.session_id == "c1-s0" and first.conversation_id == "c1"
        last_two = (await get(service, "c1", limit=2)).conversation
        assert last_two is not None and [t.sequence for t in last_two.turns] == [3, 4]
        for limit in (1, 4, 5, 9):  # a limit reads the last turns alone: the same tail
            last = (await get(service, "c1", limit=limit)).conversation
            assert last is not None and last.turns == conversation.turns[-limit:]
            assert last.turn_count == 5
        assert (await get(service, "unknown")).conversation is None

        found = await ok(
            service,
            ConversationRequest(operation="search", query="question 3 about the garden", top_k=1),
        )
        assert [t.sequence for t in found.turns] == [3]
        assert found.turns[0].similarity is not None and found.turns[0].similarity > 0.5


async def test_rolling_summary_update(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        await ok(service, append("c1", 0))
        update = ConversationRequest(
            operation="update-summary", conversation_id="c1", summary="The user grows roses."
        )
        assert (await ok(service, update)).conversation.summary == "The user grows roses."  # type: ignore[union-attr]
        update.summary = "The user grows roses and asks about watering."
        await ok(service, update)
        conversation = (await get(service, "c1")).conversation
        assert conversation is not None
        assert conversation.summary == "The user grows roses and asks about watering."
        assert len(conversation.turns) == 1
        missing = await service.ask(
            ConversationRequest(operation="update-summary", conversation_id="nope", summary="x")
        )
        assert missing.error is not None and missing.error.type == "not-found"


async def test_explicit_end_publishes_exactly_one_event(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with (
        ended_events(transport, unique) as events,
        conversation_service(transport, registry, tmp_path, unique, clock=clock) as service,
    ):
        for n in range(3):
            await ok(service, append("c1", n, user="ann"))
        await ok(
            service,
            ConversationRequest(
                operation="update-summary",
                conversation_id="c1",
                user="ann",
                summary="Roses need water.",
            ),
        )
        end = ConversationRequest(operation="end", conversation_id="c1", user="ann")
        first = (await ok(service, end)).conversation
        assert first is not None and first.ended and first.end_reason == "explicit"
        second = (await ok(service, end)).conversation  # a redelivered end
        assert second is not None and second.ended_at == first.ended_at

        event = await next_event(events)
        assert (event.workspace, event.collection, event.user, event.conversation_id) == (
            "default",
            "default",
            "ann",
            "c1",
        )
        assert (event.reason, event.ended_at, event.summary) == (
            "explicit",
            clock.now,
            "Roses need water.",
        )
        assert [t.sequence for t in event.turns] == [0, 1, 2] and event.turn_count == 3
        assert event.event_id and event.omitted_turns == 0

        # The next event on the queue is the sentinel's: no second event for c1 came first.
        await ok(service, append("sentinel", 0))
        await ok(service, ConversationRequest(operation="end", conversation_id="sentinel"))
        assert (await next_event(events)).conversation_id == "sentinel"

        # A new turn reopens the conversation; its next end is a new event with a new id.
        await ok(service, append("c1", 3, user="ann"))
        reopened = (await get(service, "c1", user="ann")).conversation
        assert reopened is not None and not reopened.ended and reopened.turn_count == 4
        await ok(service, end)
        again = await next_event(events)
        assert again.conversation_id == "c1" and again.turn_count == 4
        assert again.event_id != event.event_id


async def test_idle_timeout_ends_a_conversation_and_publishes_once(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with (
        ended_events(transport, unique) as events,
        conversation_service(
            transport,
            registry,
            tmp_path,
            unique,
            clock=clock,
            idle_timeout=600,
            sweep_interval=0.05,
        ) as service,
    ):
        await ok(service, append("quiet", 0))
        clock.advance(300)
        await ok(service, append("busy", 0))
        # An idle end re-checks under the conversation's lock: a busy one stays open.
        lifecycle = service.processor.memory.lifecycle
        still_open = await lifecycle.end(Scope("default", "default", None, "busy"), "idle")
        assert still_open is not None and not still_open["ended"]
        clock.advance(301)  # quiet: idle for 601 s; busy: 301 s
        event = await next_event(events)
        assert (event.conversation_id, event.reason, event.ended_at) == ("quiet", "idle", clock.now)
        busy = (await get(service, "busy")).conversation
        assert busy is not None and not busy.ended
        quiet = (await get(service, "quiet")).conversation
        assert quiet is not None and quiet.ended and quiet.end_reason == "idle"

        await after_sweeps(service.processor)  # none may announce "quiet" again
        await ok(service, ConversationRequest(operation="end", conversation_id="busy"))
        assert (await next_event(events)).conversation_id == "busy"
        gauge = {"processor": service.processor.id, "kind": "turn"}
        await eventually(lambda: registry.get_sample_value("tg_memory_items", gauge) == 2)


class FlakyAnnouncer(ConversationMemoryProcessor):
    """Cannot announce the first end it tries (as if its flow were down)."""

    refused = 0

    async def _publish(self, header: Any, event: ConversationEnded) -> bool:
        if not self.refused:
            self.refused += 1
            return False
        return await super()._publish(header, event)


async def test_an_end_that_could_not_be_announced_is_announced_later_once(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with (
        ended_events(transport, unique) as events,
        conversation_service(
            transport,
            registry,
            tmp_path,
            unique,
            clock=clock,
            cls=FlakyAnnouncer,
            idle_timeout=60,
            sweep_interval=0.05,
        ) as service,
    ):
        await ok(service, append("c1", 0))
        clock.advance(61)
        event = await next_event(events)
        assert (event.conversation_id, event.reason) == ("c1", "idle")
        assert service.processor.refused == 1
        await after_sweeps(service.processor)  # none may announce "c1" again
        await ok(service, append("sentinel", 0))
        await ok(service, ConversationRequest(operation="end", conversation_id="sentinel"))
        assert (await next_event(events)).conversation_id == "sentinel"


async def test_a_conversation_survives_a_restart_of_its_service(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    clock = MovableClock()
    async with conversation_service(transport, registry, tmp_path, unique, clock=clock) as service:
        for n in range(3):
            await ok(service, append("c1", n))
        await ok(
            service,
            ConversationRequest(
                operation="update-summary",
                conversation_id="c1",
                summary="Three questions about roses.",
            ),
        )
        before = (await get(service, "c1")).conversation
    async with (
        ended_events(transport, unique) as events,
        conversation_service(
            transport,
            CollectorRegistry(),
            tmp_path,
            unique,
            clock=clock,
            idle_timeout=3600,
            sweep_interval=0.05,
        ) as service,
    ):
        after = (await get(service, "c1")).conversation
        assert after is not None and after == before
        assert [t.query for t in after.turns] == [
            f"question {n} about the garden" for n in range(3)
        ]
        assert after.summary == "Three questions about roses."
        again = await ok(service, append("c1", 1))  # redelivered after the restart
        assert again.created is False
        await ok(service, append("c1", 3))
        assert [t.sequence for t in (await get(service, "c1")).conversation.turns] == [0, 1, 2, 3]  # type: ignore[union-attr]
        clock.advance(3601)  # idle while the service was away: the new one ends it
        event = await next_event(events)
        assert event.conversation_id == "c1" and event.turn_count == 4


async def test_delete_and_purge(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        await ok(service, append("c1", 0, user="ann"))
        await ok(service, append("c1", 1, user="ann"))
        await ok(service, append("c2", 0, user="ann"))
        await ok(service, append("c3", 0, user="ben"))
        await ok(service, append("c4", 0, collection="other"))

        deleted = await ok(
            service, ConversationRequest(operation="delete", conversation_id="c1", user="ann")
        )
        assert deleted.count == 3  # the header and two turns
        assert (await get(service, "c1", user="ann")).conversation is None
        listed = await ok(service, ConversationRequest(operation="list", user="ann"))
        assert [c.conversation_id for c in listed.conversations] == ["c2"]
        # Without a user: the collection's user-less conversations only, here none.
        assert (await ok(service, ConversationRequest(operation="list"))).conversations == []
        assert (await ok(service, ConversationRequest(operation="purge"))).count == 0
        assert (await ok(service, ConversationRequest(operation="purge", user="ann"))).count == 2
        assert (await get(service, "c2", user="ann")).conversation is None
        assert (await get(service, "c3", user="ben")).conversation is not None
        assert (await ok(service, ConversationRequest(operation="purge", user="ben"))).count == 2
        assert (await get(service, "c3", user="ben")).conversation is None
        assert (await get(service, "c4", collection="other")).conversation is not None


async def test_users_and_collections_do_not_see_each_others_conversations(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        await ok(service, append("shared-id", 0, user="ann"))
        await ok(service, append("shared-id", 0, user="ben", summary="ben's turn"))
        ann = (await get(service, "shared-id", user="ann")).conversation
        ben = (await get(service, "shared-id", user="ben")).conversation
        assert ann is not None and ben is not None
        assert [t.summary for t in ann.turns] == ["turn 0 summary"]
        assert [t.summary for t in ben.turns] == ["ben's turn"]
        assert (await get(service, "shared-id", user="eve")).conversation is None
        assert (
            await get(service, "shared-id", collection="other", user="ann")
        ).conversation is None
        search = ConversationRequest(operation="search", query="garden", user="eve", top_k=5)
        assert (await ok(service, search)).turns == []


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    (
        {"operation": "append", "conversation_id": "c", "session_id": "s", "query": "  "},
        "bad-request",
    ),
    ({"operation": "append", "session_id": "s", "query": "q"}, "missing-scope"),
    (
        {"operation": "append", "conversation_id": "c", "session_id": "s", "query": "q" * 20000},
        "too-large",
    ),
    (
        {
            "operation": "append",
            "conversation_id": "c",
            "session_id": "s",
            "query": "q",
            "result": "great",
        },
        "invalid",
    ),
    ({"operation": "append", "conversation_id": "c", "session_id": "s", "query": ["q"]}, "invalid"),
    (
        {
            "operation": "append",
            "conversation_id": "c",
            "session_id": "s",
            "query": "q",
            "time": -5,
        },
        "invalid",
    ),
    (
        {"operation": "append", "conversation_id": "c", "turn_id": "t" * 300, "query": "q"},
        "too-large",
    ),
    (
        {
            "operation": "append",
            "conversation_id": "c",
            "session_id": "s",
            "query": "q",
            "collection": "",
        },
        "missing-scope",
    ),
    ({"operation": "update-summary", "conversation_id": "c", "summary": ""}, "bad-request"),
    ({"operation": "end", "conversation_id": "never-seen"}, "not-found"),
    ({"operation": "get"}, "missing-scope"),
    ({"operation": "search", "query": ""}, "bad-request"),
    ({"operation": "list", "offset": "page-2"}, "bad-request"),
    ({"operation": "summarise-everything"}, "bad-operation"),
]


async def test_bad_input_is_answered_nothing_is_written_and_serving_goes_on(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        client = service.clients["default"]
        for body, kind in BAD_INPUT:
            reply = await client.request(Raw(body=body))  # type: ignore[arg-type]
            assert reply.error is not None, body
            assert reply.error.type == kind, (body, reply.error)
        assert (await ok(service, ConversationRequest(operation="list"))).conversations == []
        assert (await get(service, "c")).conversation is None
        assert (await ok(service, append("c", 0))).created is True


def test_an_event_too_large_for_the_bus_leaves_out_its_oldest_turns() -> None:
    turns = [ConversationTurn(sequence=n, query=f"q{n}", answer="a" * 1000) for n in range(10)]
    event = ConversationEnded(conversation_id="c", turns=turns, turn_count=10, summary="s")
    limit = len(event.encode()) - 2500
    lifecycle = ConversationLifecycle(
        None,  # type: ignore[arg-type]  # fitting an event touches no store
        publish=None,  # type: ignore[arg-type]
        idle_timeout=None,
        clock=MovableClock(),
        max_event_bytes=limit,
    )
    fitted = lifecycle._fit(event)
    assert len(fitted.encode()) <= limit
    assert fitted.omitted_turns == 3 and fitted.turn_count == 10
    assert [t.sequence for t in fitted.turns] == list(range(3, 10))
    assert lifecycle._fit(fitted) == fitted  # small enough: unchanged


async def test_search_finds_a_rare_token_and_brings_the_turns_around_a_hit(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    model = shared_embedder(ConversationMemorySettings.load({"id": "conversation-tests"}))
    async with conversation_service(
        transport, registry, tmp_path, unique, embedder=model
    ) as service:
        for n in range(6):
            await ok(service, append("c1", n))
        await ok(service, append("c2", 0, query="ship order QX-5581", answer="shipped"))
        rare = ConversationRequest(operation="search", query="what about QX-5581?", top_k=1)
        assert [t.conversation_id for t in (await ok(service, rare)).turns] == ["c2"]

        search = ConversationRequest(
            operation="search", query="question 3 about the garden", top_k=1, window=1
        )
        found = (await ok(service, search)).turns
        assert [(t.conversation_id, t.sequence) for t in found] == [("c1", 2), ("c1", 3), ("c1", 4)]
        assert [t.similarity is not None for t in found] == [False, True, False]
        search.top_k, search.window = 2, 2  # two hits next to each other: each turn once
        keys = [(t.conversation_id, t.sequence) for t in (await ok(service, search)).turns]
        assert len(keys) == len(set(keys)) and ("c1", 3) in keys and ("c1", 1) in keys


async def test_search_ranks_the_turns_of_a_named_time_first(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    march, july = 1709900000.0, 1720500000.0  # 2024-03-08, 2024-07-09
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        await ok(
            service, append("c1", 0, query="what soup did we cook", answer="leek soup", time=march)
        )
        await ok(
            service, append("c1", 1, query="what soup did we cook", answer="pea soup", time=july)
        )
        for named, want in [("March 2024", "leek soup"), ("July 2024", "pea soup")]:
            ask = ConversationRequest(
                operation="search", query=f"what soup did we cook in {named}?", top_k=1
            )
            assert [t.answer for t in (await ok(service, ask)).turns] == [want]


async def test_search_asking_when_ranks_a_turn_that_tells_a_time_first(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with conversation_service(transport, registry, tmp_path, unique) as service:
        said = [
            ("how do we cook leek soup", "we cook leek soup slowly: leek soup needs time"),
            ("any news", "made the soup on Friday"),
        ]
        for sequence, (query, answer) in enumerate(said):
            await ok(service, append("c1", sequence, query=query, answer=answer))
        ask = ConversationRequest(operation="search", query="when did we cook leek soup?", top_k=1)
        assert [t.answer for t in (await ok(service, ask)).turns] == [said[1][1]]
        ask.query = "how did we cook leek soup?"  # asks no time: the words decide
        assert [t.answer for t in (await ok(service, ask)).turns] == [said[0][1]]


async def test_turns_stored_before_the_tells_time_flag_get_it_when_the_service_starts(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    """A store written before the flag existed: the next service to open it fills it in
    (its first sweep), and "when" searches lift those turns too."""
    said = [
        ("how do we cook leek soup", "we cook leek soup slowly: leek soup needs time"),
        ("any news", "made the soup on Friday"),
    ]
    ask = ConversationRequest(operation="search", query="when did we cook leek soup?", top_k=1)
    async with conversation_service(transport, CollectorRegistry(), tmp_path, unique) as old:
        for sequence, (query, answer) in enumerate(said):
            await ok(old, append("c1", sequence, query=query, answer=answer))
        memory = old.processor.memory.memory
        everyone = await memory.registry.scopes()
        turns, _ = await memory._store.scroll(memory.collection, scope=everyone[0], limit=10)
        for turn in turns:  # as written before the flag existed
            await memory._store.set_payload(
                memory.collection, [turn.id], {"tells_time": None}, scope=everyone[0]
            )
        assert [t.answer for t in (await ok(old, ask)).turns] == [said[0][1]]  # not lifted
    async with conversation_service(transport, CollectorRegistry(), tmp_path, unique) as new:

        async def lifted() -> bool:
            return [t.answer for t in (await ok(new, ask)).turns] == [said[1][1]]

        await until(lifted)
