"""Audit events (issue 13): deletes, purges and forgets that succeed are recorded on the
flow's persistent audit queue and in the log, with who, what scope, what and when, and
counts, never contents; a request that fails records nothing. Over the real broker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.transport import Consumer
from react_mem.schema.audit import AuditEvent
from react_mem.schema.conversations import ConversationRequest, ConversationResponse
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.memory_services import START, MovableClock, serving, topics

pytestmark = pytest.mark.broker

SECRET = "Wendell keeps the spare key under the blue flowerpot"


@contextlib.asynccontextmanager
async def audit_trail(transport: PulsarTransport, queue: str) -> AsyncIterator[Consumer]:
    consumer = await transport.consumer(Queue.parse(queue), "archive", from_earliest=True)
    try:
        yield consumer
    finally:
        await consumer.close()


async def next_event(consumer: Consumer) -> tuple[AuditEvent, bytes]:
    delivery = await asyncio.wait_for(consumer.receive(), 10)
    await consumer.ack(delivery)
    return AuditEvent.decode(delivery.data), delivery.data


async def test_fact_deletes_and_purges_are_audited_failures_and_reads_are_not(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    queues = topics("fact-memory", unique, "ws1", ("audit",))
    caplog.set_level(logging.INFO, logger="react_mem.audit")
    async with (
        audit_trail(transport, queues["audit"]) as trail,
        serving(
            FactMemoryProcessor,
            FactResponse,
            transport,
            pid=f"fact-memory-{unique}",
            queues={"ws1": queues},
            data_dir=tmp_path / "facts",
            registry=registry,
            clock=MovableClock(),
        ) as service,
    ):

        async def ask(request: FactRequest) -> FactResponse:
            return await service.ask(request, "ws1")

        facts = [FactInput(content=SECRET), FactInput(content=f"{SECRET}, and a torch too")]
        stored = await ask(FactRequest(operation="store", user="alice", facts=facts))
        assert stored.error is None
        found = await ask(FactRequest(operation="retrieve", user="alice", query="spare key"))
        assert found.facts  # a read: never audited

        delete = FactRequest(operation="delete", user="alice", ids=[stored.stored[0].id])
        assert (await ask(delete)).deleted >= 1
        event, raw = await next_event(trail)
        assert event.operation == "delete"
        assert (event.workspace, event.flow, event.collection) == ("ws1", "f1", "default")
        assert event.user == "alice"
        assert event.processor == f"fact-memory-{unique}"
        assert event.time == START
        assert event.request_id and event.event_id
        assert event.counts["deleted"] >= 1

        # Failures record nothing: a bad id, an unknown scope size; then a purge is the next.
        bad = await ask(FactRequest(operation="delete", user="alice", ids=["not-a-uuid"]))
        assert bad.error is not None
        huge = await ask(FactRequest(operation="purge", user="u" * 300))
        assert huge.error is not None
        purged = await ask(FactRequest(operation="purge", user="alice", collection="default"))
        assert purged.error is None and purged.deleted >= 1
        event2, raw2 = await next_event(trail)
        assert (event2.operation, event2.user) == ("purge", "alice")
        assert event2.counts["deleted"] == purged.deleted
        assert event2.event_id != event.event_id

        logged = [json.loads(r.getMessage().removeprefix("audit ")) for r in caplog.records]
        assert [e["operation"] for e in logged] == ["delete", "purge"]
        assert logged[1] == json.loads(event2.model_dump_json())
        # Never contents: no word of the stored facts anywhere in the trail or the log.
        for text in (raw.decode(), raw2.decode(), caplog.text):
            assert "flowerpot" not in text and "spare key" not in text


async def test_a_conversation_purge_is_audited_with_its_count(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    queues = topics("conversation-memory", unique, "default", ("ended", "audit"))
    async with (
        audit_trail(transport, queues["audit"]) as trail,
        serving(
            ConversationMemoryProcessor,
            ConversationResponse,
            transport,
            pid=f"conversation-memory-{unique}",
            queues={"default": queues},
            data_dir=tmp_path / "conversations",
            registry=registry,
            clock=MovableClock(),
        ) as service,
    ):
        turn: dict[str, Any] = {"conversation_id": "c1", "user": "bob", "query": SECRET}
        appended = await service.ask(ConversationRequest(operation="append", answer="ok", **turn))
        assert appended.error is None
        purge = ConversationRequest(operation="purge", user="bob")
        purged = await service.ask(purge)
        assert purged.error is None and purged.count
        event, raw = await next_event(trail)
        assert (event.operation, event.user, event.collection) == ("purge", "bob", "default")
        assert event.counts == {"count": purged.count}
        assert "flowerpot" not in raw.decode()


class _Flow:
    """The little of a flow the audit reads (no audit queue here: the log only)."""

    workspace, name = "ws1", "f1"

    def has_producer(self, name: str) -> bool:
        return False

    async def send(self, producer: str, message: Any, *, id: str | None = None) -> None:
        raise AssertionError("no producer")


async def test_the_learners_forget_queue_is_audited_by_its_consumer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from react_mem.learner.service import MemoryLearnerProcessor
    from react_mem.processor.context import MessageContext
    from react_mem.processor.specs import ConsumerSpec
    from react_mem.schema.forget import ForgetRequest, ForgetResponse, Forgotten

    caplog.set_level(logging.INFO, logger="react_mem.audit")
    learner = MemoryLearnerProcessor(
        MemoryLearnerProcessor.Settings.load({"id": "memory-learner"}),
        None,  # type: ignore[arg-type]  # never started: the consumer's handler alone
        registry=CollectorRegistry(),
    )
    (spec,) = [
        s
        for s in learner.specifications
        if isinstance(s, ConsumerSpec) and s.name == "memory-forget"
    ]
    sent: list[Any] = []

    class Ctx(MessageContext):
        async def reply(self, message: Any) -> None:
            sent.append(message)

    async def on_forget(request: ForgetRequest, ctx: MessageContext) -> None:
        if not request.user:
            raise ValueError("forget needs 'user'")
        records = {"ledger-ledger": 2, "ledger-trajectories": 1}
        await ctx.reply(ForgetResponse(forgotten=Forgotten(records=records)))

    handler = learner.audited_consumer(on_forget, "forget")
    ctx = Ctx(flow=_Flow(), id="req-1", response="memory-forget-response")  # type: ignore[arg-type]
    await handler(ForgetRequest(user="carol", collection="notes"), ctx)
    with pytest.raises(ValueError, match="user"):
        await handler(ForgetRequest(user=""), ctx)
    (record,) = caplog.records
    event = json.loads(record.getMessage().removeprefix("audit "))
    assert (event["operation"], event["user"], event["collection"]) == ("forget", "carol", "notes")
    assert event["processor"] == "memory-learner" and event["request_id"] == "req-1"
    assert event["counts"] == {
        "forgotten.records.ledger-ledger": 2,
        "forgotten.records.ledger-trajectories": 1,
    }
    assert len(sent) == 1  # the reply followed the audit
    # The learner's own forget consumer is wrapped the same way.
    assert spec.handler.__qualname__ == handler.__qualname__ == "audited.<locals>.handle"


async def test_playbook_grants_and_revokes_are_audited_with_the_grantees(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    from memory_services.playbook.service import PlaybookMemoryProcessor
    from react_mem.schema.playbook import PlaybookRequest, PlaybookResponse

    queues = topics("playbook-memory", unique, "ws-a", ("audit",))
    async with (
        audit_trail(transport, queues["audit"]) as trail,
        serving(
            PlaybookMemoryProcessor,
            PlaybookResponse,
            transport,
            pid=f"playbook-memory-{unique}",
            queues={"ws-a": queues},
            data_dir=tmp_path / "playbook",
            registry=registry,
            clock=MovableClock(),
            metrics=False,
        ) as service,
    ):

        async def ask(**fields: Any) -> PlaybookResponse:
            return await service.ask(PlaybookRequest(**fields), "ws-a")

        refused = await ask(
            operation="grant",
            user="bob",
            playbook_owner="alice",
            relation="viewer",
            grantees=["bob"],
        )
        assert refused.error is not None  # only the owner grants: nothing recorded
        assert (await ask(operation="list", user="alice")).error is None  # a read: nothing
        granted = await ask(operation="grant", user="alice", relation="viewer", grantees=["bob"])
        assert granted.error is None
        revoked = await ask(operation="revoke", user="alice", grantees=["bob"])
        assert revoked.error is None
        first, _ = await next_event(trail)
        second, _ = await next_event(trail)
        assert (first.operation, first.user, first.grantees, first.relation) == (
            "grant",
            "alice",
            ["bob"],
            "viewer",
        )
        assert (second.operation, second.user, second.grantees) == ("revoke", "alice", ["bob"])
