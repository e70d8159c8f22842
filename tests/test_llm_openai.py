"""The OpenAI-compatible text-completion processor over the real embedded broker, against a
real HTTP server that speaks the chat-completions API (tests/support/openai_server.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.llm.openai_compat import OpenAICompatibleProcessor, OpenAISettings
from react_mem.processor.runtime import resolve_processor
from react_mem.schema import TextCompletionRequest, TextCompletionResponse
from tests.support.openai_server import MODEL, OpenAIServer
from tests.support.ping import flow_file

pytestmark = pytest.mark.broker

KEY = "sk-test-7f3a9c"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    running = OpenAIServer()
    running.start()
    yield running
    running.stop()


@dataclass
class Harness:
    processor: OpenAICompatibleProcessor
    client: RequestResponseClient[TextCompletionRequest, TextCompletionResponse]
    topics: dict[str, str]

    async def ask(self, **fields: Any) -> TextCompletionResponse:
        return await self.client.request(TextCompletionRequest(**fields))

    async def stream(self, **fields: Any) -> list[TextCompletionResponse]:
        request = TextCompletionRequest(streaming=True, **fields)
        return [r async for r in self.client.stream(request, last=lambda r: r.end_of_stream)]


@contextlib.asynccontextmanager
async def text_completion(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
    **settings: Any,
) -> AsyncIterator[Harness]:
    pid = f"tc-{unique}"
    topics = {"request": f"request:tg:tc-{unique}", "response": f"response:tg:tc-{unique}"}
    config = {
        "id": pid,
        "flows": flow_file(tmp_path, pid, topics),
        "base_url": server.url,
        "model": "served-model",
        "api_key": KEY,
        "timeout": 5,
        "llm_retry_delay": 0.01,
    }
    values = {k: v for k, v in (config | settings).items() if v is not None}  # None: unset
    processor = OpenAICompatibleProcessor(OpenAISettings.load(values), transport, registry=registry)
    await processor.start()
    client: RequestResponseClient[TextCompletionRequest, TextCompletionResponse] = (
        RequestResponseClient(
            transport, topics["request"], topics["response"], TextCompletionResponse, timeout=15
        )
    )
    await client.start()
    try:
        yield Harness(processor, client, topics)
    finally:
        await client.close()
        await processor.stop()


def sample(registry: CollectorRegistry, name: str, unique: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {"processor": f"tc-{unique}", **labels})


async def test_completion_round_trip_over_the_bus(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    async with text_completion(transport, registry, tmp_path, unique, server) as tc:
        reply = await tc.ask(system="You are terse.", prompt="hello there")
        assert reply.error is None
        assert reply.response == "echo: hello there"
        assert (reply.in_token, reply.out_token) == (5, 3)  # the server's word counts
        assert reply.model == MODEL and reply.end_of_stream
        (sent,) = server.requests
        assert sent.path == "/v1/chat/completions"
        assert sent.body["model"] == "served-model" and sent.body["temperature"] == 0
        assert sent.body["messages"] == [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "hello there"},
        ]
        assert not sent.body.get("stream") and "response_format" not in sent.body
        assert sent.headers["authorization"] == f"Bearer {KEY}"

        # Exactly the bytes a TrustGraph client sends; the reply is TrustGraph's shape.
        replies = await transport.consumer(Queue.parse(tc.topics["response"]), f"raw-{unique}")
        producer = await transport.producer(Queue.parse(tc.topics["request"]))
        try:
            raw = b'{"system": "", "prompt": "raw bytes", "streaming": false}'
            await producer.send(raw, {"id": f"raw-{unique}"})
            delivery = await asyncio.wait_for(replies.receive(), 15)
            await replies.ack(delivery)
        finally:
            await producer.close()
            await replies.close()
        assert delivery.properties["id"] == f"raw-{unique}"
        assert json.loads(delivery.data) == {
            "error": None,
            "response": "echo: raw bytes",
            "in_token": 2,
            "out_token": 3,
            "model": MODEL,
            "end_of_stream": True,
        }
        assert server.requests[-1].body["messages"] == [{"role": "user", "content": "raw bytes"}]

    ok = sample(registry, "tg_llm_requests_total", unique, model="served-model", outcome="ok")
    assert ok == 2
    tokens_in = sample(
        registry, "tg_llm_tokens_total", unique, model="served-model", direction="in"
    )
    assert tokens_in == 7
    count = sample(registry, "tg_llm_request_duration_seconds_count", unique, model="served-model")
    assert count == 2


async def test_streaming_sends_chunks_then_a_final_end_of_stream(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    async with text_completion(transport, registry, tmp_path, unique, server) as tc:
        responses = await tc.stream(prompt="one two three four")
        *chunks, final = responses
        assert [c.response for c in chunks] == ["echo:", " one", " two", " three", " four"]
        assert all(not c.end_of_stream and c.error is None for c in chunks)
        assert all(c.model == MODEL for c in responses)
        assert final.end_of_stream and final.response == "" and final.error is None
        assert (final.in_token, final.out_token) == (4, 5)
        (sent,) = server.requests
        assert sent.body["stream"] is True
        assert sent.body["stream_options"] == {"include_usage": True}

        # A failure before the first chunk is retried; the caller sees one clean stream.
        server.fail(503)
        again = await tc.stream(prompt="a b")
        assert "".join(r.response for r in again) == "echo: a b"
        assert [r.end_of_stream for r in again] == [False, False, False, True]
        assert len(server.requests) == 3

        # Broken off before any text: retried. After some text: an error ends the stream,
        # with no retry (a caller cannot unsee the chunks it has).
        server.cut(after=1)  # the role-only first event
        assert "".join(r.response for r in await tc.stream(prompt="x y")) == "echo: x y"
        assert len(server.requests) == 5
        server.cut(after=3)
        *partial, broken = await tc.stream(prompt="one two three four")
        assert [c.response for c in partial] == ["echo:", " one"]
        assert broken.error is not None and broken.error.type == "llm-error"
        assert broken.end_of_stream and len(server.requests) == 6


async def test_json_output_is_requested_with_the_schema(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    server.reply = lambda _: '{"name": "Ada", "age": 36}'
    async with text_completion(transport, registry, tmp_path, unique, server) as tc:
        reply = await tc.ask(prompt="Who?", response_format="json", schema=SCHEMA)
        assert json.loads(reply.response) == {"name": "Ada", "age": 36}
        assert server.requests[-1].body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": SCHEMA},
        }
        await tc.ask(prompt="Who?", response_format="json")  # JSON, no schema
        assert server.requests[-1].body["response_format"] == {"type": "json_object"}
        streamed = await tc.stream(prompt="Who?", response_format="json", schema=SCHEMA)
        assert json.loads("".join(r.response for r in streamed)) == {"name": "Ada", "age": 36}
        assert server.requests[-1].body["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    ("json_mode", "expected"), [("json_object", {"type": "json_object"}), ("none", None)]
)
async def test_json_mode_setting_suits_older_servers(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
    json_mode: str,
    expected: dict[str, str] | None,
) -> None:
    async with text_completion(
        transport, registry, tmp_path, unique, server, json_mode=json_mode
    ) as tc:
        await tc.ask(prompt="Who?", response_format="json", schema=SCHEMA)
        assert server.requests[-1].body.get("response_format") == expected


async def test_transient_failures_are_retried_then_succeed(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    async with text_completion(transport, registry, tmp_path, unique, server) as tc:
        server.fail(500)
        server.fail(429)
        reply = await tc.ask(prompt="persist")
        assert reply.error is None and reply.response == "echo: persist"
        assert len(server.requests) == 3
        assert all(r.body == server.requests[0].body for r in server.requests)

        server.fail(400)  # the endpoint refused the request itself: not worth retrying
        refused = await tc.ask(prompt="refused")
        assert refused.error is not None and refused.error.type == "llm-error"
        assert "400" in refused.error.message and refused.end_of_stream
        assert len(server.requests) == 4


async def test_persistent_failure_is_answered_with_an_error_not_a_hang(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with text_completion(
        transport, registry, tmp_path, unique, server, llm_attempts=3, timeout=0.3
    ) as tc:
        server.fail(500, times=6)
        reply = await tc.ask(prompt="doomed")
        assert reply.error is not None and reply.error.type == "llm-error"
        assert "500" in reply.error.message and reply.end_of_stream
        assert len(server.requests) == 3  # the processor's attempts; no redelivery on top

        streamed = await tc.stream(prompt="doomed too")  # streaming callers get the error too
        assert len(streamed) == 1 and streamed[0].error is not None
        assert streamed[0].error.type == "llm-error" and streamed[0].end_of_stream
        assert len(server.requests) == 6

        server.delay = 1.0  # slower than the timeout: each attempt times out
        slow = await tc.ask(prompt="too slow")
        assert slow.error is not None and slow.error.type == "llm-error"
        assert "timed out" in slow.error.message.lower()
        assert len(server.requests) == 9  # each cut off at the timeout ("timed out"), no hang
    failed = sample(
        registry, "tg_llm_requests_total", unique, model="served-model", outcome="error"
    )
    assert failed == 3
    assert KEY not in caplog.text


async def test_unreachable_endpoint_is_an_error_reply(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    server.stop()  # nothing listens on its port any more
    async with text_completion(transport, registry, tmp_path, unique, server, llm_attempts=2) as tc:
        reply = await tc.ask(prompt="anyone?")
        assert reply.error is not None and reply.error.type == "llm-error"
        assert "unreachable" in reply.error.message


async def test_bad_input_is_answered_and_the_processor_keeps_serving(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    async with text_completion(
        transport, registry, tmp_path, unique, server, max_input_chars=100
    ) as tc:
        empty = await tc.ask(system="  ", prompt="")
        assert empty.error is not None and empty.error.type == "bad-request"
        assert empty.end_of_stream
        big = await tc.ask(prompt="x" * 101)
        assert big.error is not None and big.error.type == "too-large"
        odd = await tc.ask(prompt="hi", response_format="xml")
        assert odd.error is not None and odd.error.type == "bad-request"
        streamed = await tc.stream(prompt="")
        assert len(streamed) == 1 and streamed[0].error is not None

        replies = await transport.consumer(Queue.parse(tc.topics["response"]), f"raw-{unique}")
        producer = await transport.producer(Queue.parse(tc.topics["request"]))
        try:
            for n, body in enumerate([b"not json", b'{"prompt": ["a list"]}']):
                await producer.send(body, {"id": f"bad-{n}"})
                delivery = await asyncio.wait_for(replies.receive(), 15)
                await replies.ack(delivery)
                error = TextCompletionResponse.decode(delivery.data).error
                assert error is not None and error.type in {"malformed", "invalid"}
        finally:
            await producer.close()
            await replies.close()
        assert server.requests == []  # none of it reached the LLM

        good = await tc.ask(prompt="still there?")
        assert good.error is None and good.response == "echo: still there?"


async def test_key_and_url_come_from_the_environment(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("REACT_MEM_MODEL", "env-model")
    settings = OpenAISettings.load({"id": "x"})
    assert settings.base_url == server.url and settings.model == "env-model"
    assert "sk-from-env" not in repr(settings)
    async with text_completion(
        transport, registry, tmp_path, unique, server, api_key=None, base_url=settings.base_url
    ) as tc:
        await tc.ask(prompt="who am I?")
    assert server.requests[-1].headers["authorization"] == "Bearer sk-from-env"
    assert resolve_processor("text-completion-openai") is OpenAICompatibleProcessor


async def test_a_flows_model_and_temperature_parameters_are_honoured(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    """TrustGraph's blueprint gives each text-completion flow ``model`` and ``temperature``
    (strings); requests on that flow use them, other flows keep the processor's."""
    pid = f"tc-{unique}"

    def flow(name: str, parameters: dict[str, str]) -> dict[str, Any]:
        tail = f"tc-{unique}:default:{name}"
        topics = {"request": f"request:tg:{tail}", "response": f"response:tg:{tail}"}
        return {"topics": topics, "parameters": parameters}

    flows = {
        "plain": flow("plain", {}),
        "tuned": flow("tuned", {"model": "flow-model", "temperature": "0.7"}),
        "broken": flow("broken", {"temperature": "hot"}),
    }
    path = tmp_path / "flows.yaml"
    path.write_text(json.dumps({"default": {f"processor:{pid}": flows}}))
    settings = {"id": pid, "flows": path, "base_url": server.url, "model": "served-model"}
    processor = OpenAICompatibleProcessor(
        OpenAISettings.load(settings | {"api_key": KEY}), transport, registry=registry
    )
    await processor.start()
    try:
        for name, model, temperature in (
            ("plain", "served-model", 0),
            ("tuned", "flow-model", 0.7),
        ):
            topics = flows[name]["topics"]
            client: RequestResponseClient[TextCompletionRequest, TextCompletionResponse] = (
                RequestResponseClient(
                    transport, topics["request"], topics["response"], TextCompletionResponse
                )
            )
            await client.start()
            try:
                reply = await client.request(TextCompletionRequest(prompt="hi"), timeout=15)
                assert reply.error is None
                await client.request(TextCompletionRequest(prompt="hi", streaming=True), timeout=15)
            finally:
                await client.close()
            for sent in server.requests[-2:]:
                assert (sent.body["model"], sent.body["temperature"]) == (model, temperature)
        topics = flows["broken"]["topics"]
        client = RequestResponseClient(
            transport, topics["request"], topics["response"], TextCompletionResponse
        )
        await client.start()
        try:
            refused = await client.request(TextCompletionRequest(prompt="hi"), timeout=15)
        finally:
            await client.close()
        assert refused.error is not None and "temperature 'hot'" in refused.error.message
        assert len(server.requests) == 4
    finally:
        await processor.stop()
