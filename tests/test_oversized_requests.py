"""An oversized memory request is refused at once, naming the limit, and writes nothing
(issue 26, finding 4): an episode of 100,000 lessons was refused only after the PII screen
had read every lesson (16.5 s), and a list of a million empty objects took a minute to
validate, on the loop every service of the process shares.

Two guards, each shown here to be the one that answers: a request holding more values
than a memory request may (or a list past its wire limit) is refused when decoded, before
validation; and each service checks its own count and size limits before the PII screen
reads the texts. The screen runs with ``pii-policy: drop`` and the first text of each
request holds an e-mail address, so a request that reached the screen first would come
back ``pii-refused`` instead of naming the limit. Over the real broker (both where
installed); the services' real stores and PII detector, a hashing embedder.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.conversations.service import ConversationMemoryProcessor
from memory_services.episodes.service import EpisodeMemoryProcessor
from memory_services.facts.service import FactMemoryProcessor
from memory_services.playbook.service import PlaybookMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.errors import BadRequest
from react_mem.schema import AgentStep, WireModel
from react_mem.schema.agent import AgentRequest
from react_mem.schema.base import MAX_REQUEST_VALUES
from react_mem.schema.conversations import ConversationRequest, ConversationResponse
from react_mem.schema.episodes import MAX_EPISODE_STEPS, EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import MAX_FACT_BATCH, FactInput, FactRequest, FactResponse
from react_mem.schema.playbook import (
    MAX_DELTA_OPERATIONS,
    Delta,
    DeltaOperation,
    PlaybookRequest,
    PlaybookResponse,
)
from react_mem.schema.working import MAX_WORKING_STEPS, WorkingMemoryRequest
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, Raw, serving, topics

#: Found by the screen's e-mail recognizer: under ``drop``, a screened request is refused.
PII = "write to ada.lovelace@example.com about the lantern"


def encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def refused(cls: type[WireModel], body: dict[str, Any]) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        cls.decode(encoded(body))
    return caught.value


# -- when decoded -------------------------------------------------------------------------


def test_an_episode_of_100000_lessons_is_refused_when_decoded_naming_the_limit() -> None:
    body = {"operation": "store", "goal": "g", "outcome": "success"}
    error = refused(EpisodeRequest, body | {"lessons": [f"lesson {n}" for n in range(100_000)]})
    assert error.type == "too-large"
    assert "lessons" in str(error) and f"limit is {MAX_REQUEST_VALUES}" in str(error)


#: Each memory request's lists of objects, filled with empty ones past every limit: the
#: walk that counts values stops at the first container past it (a million objects took
#: a minute to validate before).
FLOODS: list[tuple[type[WireModel], Callable[[list[Any]], dict[str, Any]], str]] = [
    (FactRequest, lambda many: {"operation": "store", "facts": many}, "facts"),
    (EpisodeRequest, lambda many: {"operation": "store", "steps": many}, "steps"),
    (EpisodeRequest, lambda many: {"operation": "store", "steps": [{"plan": many}]}, "plan"),
    (
        PlaybookRequest,
        lambda many: {"operation": "apply-delta", "delta": {"operations": many}},
        "delta.operations",
    ),
    (WorkingMemoryRequest, lambda many: {"operation": "compress", "steps": many}, "steps"),
    (FactRequest, lambda many: {"operation": "retrieve", "vector": [0.5] * len(many)}, "vector"),
    (ConversationRequest, lambda many: {"operation": "get", "junk": many}, "junk"),
    (AgentRequest, lambda many: {"question": "q", "history": many}, "history"),
]


@pytest.mark.parametrize(("cls", "body", "field"), FLOODS)
def test_a_request_of_more_values_than_a_request_may_hold_is_refused_when_decoded(
    cls: type[WireModel], body: Callable[[list[Any]], dict[str, Any]], field: str
) -> None:
    error = refused(cls, body([{}] * 200_000))
    assert error.type == "too-large", error
    assert field in str(error) and f"limit is {MAX_REQUEST_VALUES}" in str(error)


def test_a_list_past_its_wire_limit_is_refused_naming_the_field_and_the_limit() -> None:
    error = refused(FactRequest, {"operation": "store", "facts": [{}] * (MAX_FACT_BATCH + 1)})
    assert error.type == "too-large"
    assert str(error) == (
        f"FactRequest: facts: more than {MAX_FACT_BATCH} items; the limit is {MAX_FACT_BATCH}"
    )
    error = refused(FactRequest, {"operation": "retrieve", "vector": [0.5] * 10_000})
    assert error.type == "too-large" and "vector: more than 8192 items" in str(error)


def test_a_biggest_valid_request_still_decodes() -> None:
    facts = [{"content": "x" * 4000, "metadata": {"k": "v"}} for _ in range(256)]
    assert len(FactRequest.decode(encoded({"operation": "store", "facts": facts})).facts) == 256
    steps = [{"thought": "t", "arguments": {"a": "b"}, "plan": [{"goal": "g"}] * 10}] * 200
    body = {"operation": "store", "goal": "g", "outcome": "success", "steps": steps}
    assert len(EpisodeRequest.decode(encoded(body | {"lessons": ["l"] * 50})).steps) == 200


def test_every_list_at_its_wire_limit_fits_in_the_values_a_request_may_hold() -> None:
    """As a client encodes them (every field written), so a service configured up to the
    wire's limit never finds its requests refused for their value count."""
    step = AgentStep(thought="t", action="search", arguments={"q": "x"}, observation="o")
    fact = FactInput(content="x", metadata={"k": "v"}, updates=[str(uuid.uuid4())])
    operation = DeltaOperation(type="ADD", content="x", tags=["a", "b"], metadata={"k": "v"})
    requests: list[WireModel] = [
        FactRequest(operation="store", facts=[fact] * MAX_FACT_BATCH),
        EpisodeRequest(operation="store", steps=[step] * MAX_EPISODE_STEPS, lessons=["l"] * 50),
        WorkingMemoryRequest(operation="compress", steps=[step] * MAX_WORKING_STEPS),
        PlaybookRequest(
            operation="apply-delta",
            delta=Delta(delta_id="d", operations=[operation] * MAX_DELTA_OPERATIONS),
        ),
    ]
    for request in requests:
        assert type(request).decode(request.encode()) == request


# -- by each service, before the PII screen -----------------------------------------------


@pytest.mark.broker
async def test_an_episode_over_its_limits_is_refused_before_the_screen_and_stored_nowhere(
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
        embedder=HashingEmbedder(),
        pii_policy="drop",
        metrics=False,
    ) as svc:
        store = {"operation": "store", "user": "ada", "goal": "find the lantern"}
        store |= {"outcome": "success"}
        cases = [
            (store | {"lessons": [PII] * 51}, "store: 51 lessons exceed 50"),
            (store | {"lessons": [PII] + ["lesson"] * 99_999}, f"limit is {MAX_REQUEST_VALUES}"),
            (store | {"lessons": [PII, "x" * 2001]}, "a lesson exceeds 2000 characters"),
            (store | {"steps": [{"observation": PII + "x" * 600_000}]}, "exceeds 524288"),
        ]
        for body, limit in cases:
            reply = await svc.ask(Raw(body=body), "ws")
            assert reply.error is not None and reply.error.type == "too-large", reply.error
            assert limit in reply.error.message
        # The screen still refuses what is within the limits and holds PII.
        reply = await svc.ask(Raw(body=store | {"lessons": [PII]}), "ws")
        assert reply.error is not None and reply.error.type == "pii-refused"
        listed = await svc.ask(EpisodeRequest(operation="list", user="ada"), "ws")
        assert listed.error is None and listed.episodes == []
        stored = await svc.ask(Raw(body=store | {"lessons": ["check the oil"]}), "ws")
        assert stored.error is None and stored.created


@pytest.mark.broker
async def test_a_fact_batch_over_its_limits_is_refused_before_the_screen_and_stored_nowhere(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with serving(
        FactMemoryProcessor,
        FactResponse,
        transport,
        pid=f"fact-memory-{unique}",
        queues={"ws": topics("fact-memory", unique, "ws")},
        data_dir=tmp_path / "facts",
        registry=registry,
        clock=MovableClock(),
        embedder=HashingEmbedder(),
        pii_policy="drop",
        metrics=False,
    ) as svc:
        fact = {"content": PII}
        cases = [
            ({"facts": [fact] * 257}, "facts: 257 in one request; at most 256", "too-large"),
            ({"facts": [fact, {"content": "x" * 4001}]}, "the limit is 4000", "bad-content"),
            ({"facts": [fact] * 2000}, "facts: more than 1024 items", "too-large"),
        ]
        for extra, limit, kind in cases:
            reply = await svc.ask(Raw(body={"operation": "store", "user": "ada"} | extra), "ws")
            assert reply.error is not None and reply.error.type == kind, reply.error
            assert limit in reply.error.message
        listed = await svc.ask(FactRequest(operation="list", user="ada"), "ws")
        assert listed.error is None and listed.facts == []
        body = {"operation": "store", "user": "ada", "facts": [{"content": "I like tea"}] * 256}
        stored = await svc.ask(Raw(body=body), "ws")
        assert stored.error is None and len(stored.stored) == 256


@pytest.mark.broker
async def test_a_turn_over_its_limits_is_refused_before_the_screen_and_stored_nowhere(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with serving(
        ConversationMemoryProcessor,
        ConversationResponse,
        transport,
        pid=f"conversation-memory-{unique}",
        queues={"ws": topics("conversation-memory", unique, "ws", ("ended",))},
        data_dir=tmp_path / "conversations",
        registry=registry,
        clock=MovableClock(),
        embedder=HashingEmbedder(),
        pii_policy="drop",
        metrics=False,
    ) as svc:
        turn = {"operation": "append", "user": "ada", "conversation_id": "c1", "turn_id": "t1"}
        cases = [
            (turn | {"query": PII, "answer": "x" * 64_001}, "answer of 64001 characters"),
            (
                {"operation": "update-summary", "user": "ada", "conversation_id": "c1"}
                | {"summary": PII + "x" * 64_000},
                "exceeds",
            ),
        ]
        for body, limit in cases:
            reply = await svc.ask(Raw(body=body), "ws")
            assert reply.error is not None and reply.error.type == "too-large", reply.error
            assert limit in reply.error.message
        get = ConversationRequest(operation="get", user="ada", conversation_id="c1")
        got = await svc.ask(get, "ws")
        assert got.error is None and got.conversation is None
        ok = await svc.ask(Raw(body=turn | {"query": "where is the lantern?"}), "ws")
        assert ok.error is None and ok.created


@pytest.mark.broker
async def test_a_delta_over_its_limits_is_refused_before_the_screen_and_applies_nothing(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    async with serving(
        PlaybookMemoryProcessor,
        PlaybookResponse,
        transport,
        pid=f"playbook-memory-{unique}",
        queues={"ws": topics("playbook-memory", unique, "ws")},
        data_dir=tmp_path / "playbook",
        registry=registry,
        clock=MovableClock(),
        embedder=HashingEmbedder(),
        pii_policy="drop",
        seed_bullets=None,
        metrics=False,
    ) as svc:
        add = {"type": "ADD", "content": PII}
        delta = {"delta_id": "d1", "operations": [add] * 257}
        reply = await svc.ask(Raw(body={"operation": "apply-delta", "delta": delta}), "ws")
        assert reply.error is not None and reply.error.type == "bad-delta", reply.error
        assert "delta has 257 operations; at most 256" in reply.error.message
        listed = await svc.ask(PlaybookRequest(operation="list"), "ws")
        assert listed.error is None and listed.bullets == []
        # The screen still refuses a delta within the limits that holds PII.
        delta = {"delta_id": "d2", "operations": [add]}
        reply = await svc.ask(Raw(body={"operation": "apply-delta", "delta": delta}), "ws")
        assert reply.error is not None and reply.error.type == "pii-refused"
