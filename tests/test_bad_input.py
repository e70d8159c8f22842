"""Hostile payloads over the real broker: answered at once as bad input, never retried,
never holding a consumer slot (issue: deep nesting, lone surrogates)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue, dead_letter_queue
from react_mem.errors import BadRequest
from react_mem.schema import AgentRequest
from react_mem.schema.facts import FactInput, FactRequest
from react_mem.schema.payload import PayloadError, check_payload
from react_mem.schema.ping import PingRequest, PingResponse
from tests.support import recording
from tests.support.fact_memory import FactService, fact_service
from tests.support.hostile import DEEP_ARRAY, DEEP_OBJECT, RawBytes
from tests.test_processor_broker import ping_service, start_recording

pytestmark = pytest.mark.broker


@pytest.mark.parametrize("nested", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
def test_deep_nesting_is_malformed_not_a_crash(nested: bytes) -> None:
    for payload in (nested, b'{"question": ' + nested + b"}"):
        with pytest.raises(BadRequest) as caught:
            AgentRequest.decode(payload)
        assert caught.value.type == "malformed"


def test_a_lone_surrogate_is_invalid_and_the_field_is_named() -> None:
    with pytest.raises(BadRequest) as caught:
        AgentRequest.decode(b'{"question": "ok", "history": [{"thought": "tea \\udfff"}]}')
    assert caught.value.type == "invalid"
    assert "history.0.thought" in str(caught.value)
    # A surrogate pair is a real character, not a lone surrogate.
    assert AgentRequest.decode(b'{"question": "tea \\ud83c\\udf75"}').question == "tea \U0001f375"


async def test_deeply_nested_requests_do_not_hold_the_slots(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """More nested requests than the service has slots, then a valid one: all answered."""
    async with ping_service(transport, registry, tmp_path, unique, concurrency=2) as (_, client):
        bad = [DEEP_ARRAY, DEEP_OBJECT, b'{"message": ' + DEEP_ARRAY + b"}"] * 2
        replies = await asyncio.gather(*(client.request(RawBytes(b), timeout=20) for b in bad))
        assert all(r.error is not None and r.error.type == "malformed" for r in replies)
        good = await client.request(PingRequest(message="still here"), timeout=20)
        assert good.error is None and good.message == "still here"


async def test_deeply_nested_flow_message_is_dead_lettered_as_invalid(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    processor = await start_recording(transport, registry, tmp_path, unique)
    queue = Queue.parse(f"flow:tg:in-{unique}")
    subscription = f"{processor.id}--default--f1--input"
    dlq = await transport.consumer(dead_letter_queue(queue, subscription), "t", from_earliest=True)
    producer = await transport.producer(queue)
    try:
        await producer.send(DEEP_OBJECT, {"id": "deep"})
        await producer.send(PingRequest(message="after").encode(), {"id": "ok"})
        dead = await asyncio.wait_for(dlq.receive(), 20)
        assert dead.properties["dlq-reason"] == "invalid" and dead.properties["id"] == "deep"
        await recording.eventually(lambda: bool(processor.done), timeout=20)
        assert processor.done == ["after"]
    finally:
        await processor.stop()
        for endpoint in (dlq, producer):
            await endpoint.close()


async def test_unencodable_text_is_answered_invalid_at_once(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """Before, the embedder failed on it and it was retried for ~16 s as a transient fault."""
    async with fact_service(transport, registry, tmp_path, unique, client=FactService) as facts:
        lone = b'{"operation": "retrieve", "collection": "c", "query": "tea \\udfff"}'
        reply = await facts.running.clients["ws-a"].request(RawBytes(lone), timeout=20)
        assert reply.error is not None and reply.error.type == "invalid"
        assert "query" in reply.error.message and "surrogate" in reply.error.message
        stored = b'{"operation": "store", "facts": [{"content": "x \\ud800 y"}]}'
        reply = await facts.running.clients["ws-a"].request(RawBytes(stored), timeout=20)
        assert reply.error is not None and "facts.0.content" in reply.error.message
        retried = registry.get_sample_value(
            "tg_consumer_redelivery_total",
            {"processor": facts.processor.id, "consumer": facts.topics["ws-a"]["request"]},
        )
        assert not retried  # bad input is never retried
        await facts.ok("store", facts=[FactInput(content="Alice drinks tea.")], collection="c")
        found = await facts.running.ask(
            FactRequest(operation="retrieve", query="tea", collection="c"), "ws-a"
        )
        assert [f.content for f in found.facts] == ["Alice drinks tea."]


async def test_a_failing_error_reply_settles_the_message_once(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A defect while answering bad input neither retries the message nor dead-letters it
    twice, and the consumer keeps serving."""

    def response(**fields: object) -> PingResponse:
        if "error" in fields:
            raise ValueError("reply builder defect")
        return PingResponse(**fields)  # type: ignore[arg-type]

    monkeypatch.setattr(recording, "PingResponse", response)
    processor = await start_recording(transport, registry, tmp_path, unique)
    queue = Queue.parse(f"flow:tg:in-{unique}")
    subscription = f"{processor.id}--default--f1--input"
    dlq = await transport.consumer(dead_letter_queue(queue, subscription), "t", from_earliest=True)
    producer = await transport.producer(queue)
    try:
        await producer.send(b"{not json", {"id": "bad"})
        await producer.send(PingRequest(message="after").encode(), {"id": "ok"})
        dead = await asyncio.wait_for(dlq.receive(), 20)
        assert dead.properties["dlq-reason"] == "invalid"
        await recording.eventually(lambda: bool(processor.done), timeout=20)
        assert processor.done == ["after"]
        # Dead-lettered once, not once per attempt: nothing of it is left to come round ...
        await recording.settled(processor, registry, queue.id, undecodable=1)
        assert processor.attempts == [("after", 0)]
        # ... and the next dead letter is a later message's, not the first one's again.
        await producer.send(b"{probe", {"id": "probe"})
        probe = await asyncio.wait_for(dlq.receive(), 20)
        assert probe.properties["id"] == "probe"
    finally:
        await processor.stop()
        for endpoint in (dlq, producer):
            await endpoint.close()


def _depth(value: object) -> int:
    """Containers on the deepest path (the reference the payload check must agree with)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=40,
)


@given(value=_JSON, limit=st.integers(min_value=1, max_value=8))
def test_the_depth_check_refuses_exactly_what_nests_past_the_limit(
    value: object, limit: int
) -> None:
    """The payload check's depth walk (which keeps no paths) against a plain recursion: a
    payload passes iff no container sits ``limit`` levels down, and a refusal names a
    path."""
    if _depth(value) > limit:
        with pytest.raises(PayloadError) as caught:
            check_payload(value, max_depth=limit, texts=False)
        assert caught.value.type == "malformed"
    else:
        check_payload(value, max_depth=limit, texts=False)
