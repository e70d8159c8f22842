"""The llama.cpp text-completion processor with the real SmolLM2-135M-Instruct model, over
the real embedded broker. Needs the local-llm extra; skipped without it."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.errors import ConfigurationError
from react_mem.llm import llama_cpp as backend
from react_mem.llm.llama_cpp import LlamaCppProcessor, LlamaCppSettings
from react_mem.processor.runtime import resolve_processor
from react_mem.schema import TextCompletionRequest, TextCompletionResponse
from tests.support.ping import flow_file

Client = RequestResponseClient[TextCompletionRequest, TextCompletionResponse]

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
CAPITAL = TextCompletionRequest(
    system="You are a helpful assistant.", prompt="What is the capital of France?"
)


def needs_local_llm() -> None:
    pytest.importorskip("llama_cpp")
    try:
        importlib.metadata.distribution(backend.PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{backend.PACKAGE} is not installed (the local-llm extra)")


@contextlib.asynccontextmanager
async def llama(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[Client]:
    needs_local_llm()
    pid = f"llama-{unique}"
    topics = {"request": f"request:tg:tc-{unique}", "response": f"response:tg:tc-{unique}"}
    settings = LlamaCppSettings.load(
        {"id": pid, "flows": flow_file(tmp_path, pid, topics), "max_tokens": 64, "concurrency": 2}
    )
    processor = LlamaCppProcessor(settings, transport, registry=registry)
    await processor.start()
    client: Client = RequestResponseClient(
        transport, topics["request"], topics["response"], TextCompletionResponse, timeout=60
    )
    await client.start()
    try:
        yield client
    finally:
        await client.close()
        await processor.stop()


async def streamed(client: Client, request: TextCompletionRequest) -> list[TextCompletionResponse]:
    request = request.model_copy(update={"streaming": True})
    return [r async for r in client.stream(request, last=lambda r: r.end_of_stream)]


@pytest.mark.slow
@pytest.mark.broker
async def test_real_completion_and_stream_over_the_bus(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="react_mem.llm.llama_cpp")
    async with llama(transport, registry, tmp_path, unique) as client:
        assert "loaded SmolLM2-135M-Instruct.Q4_1.gguf in" in caplog.text

        # The event loop keeps turning while the model works on its thread.
        gaps: list[float] = []

        async def tick() -> None:
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.01)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        ticker = asyncio.create_task(tick())
        # Two at once (concurrency 2): the model takes them one after the other.
        reply, other = await asyncio.gather(
            client.request(CAPITAL), client.request(TextCompletionRequest(prompt="Say hello."))
        )
        ticker.cancel()
        assert reply.error is None and other.error is None and other.response
        assert "Paris" in reply.response
        assert reply.model == "SmolLM2-135M-Instruct.Q4_1" and reply.end_of_stream
        assert reply.in_token and reply.in_token > 10 and reply.out_token
        assert len(gaps) > 10 and max(gaps) < 0.5

        *chunks, final = await streamed(client, CAPITAL)
        assert len(chunks) > 2 and not any(c.end_of_stream for c in chunks)
        assert "".join(c.response for c in chunks) == reply.response  # temperature 0
        assert final.end_of_stream and final.response == "" and final.error is None
        assert (final.in_token, final.out_token) == (reply.in_token, reply.out_token)

    completed = registry.get_sample_value(
        "tg_llm_requests_total",
        {"processor": f"llama-{unique}", "model": reply.model, "outcome": "ok"},
    )
    assert completed == 3


@pytest.mark.slow
@pytest.mark.broker
async def test_json_output_is_grammar_constrained_to_the_schema(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    request = TextCompletionRequest(
        prompt="Describe a person called Ada who is 36 years old.",
        response_format="json",
        schema=PERSON,
    )
    async with llama(transport, registry, tmp_path, unique) as client:
        reply = await client.request(request)
        assert reply.error is None
        jsonschema.validate(json.loads(reply.response), PERSON)
        chunks = await streamed(client, request)
        jsonschema.validate(json.loads("".join(c.response for c in chunks)), PERSON)
        any_json = await client.request(
            TextCompletionRequest(prompt="List three colours.", response_format="json")
        )
        json.loads(any_json.response)

        too_long = await client.request(TextCompletionRequest(prompt="word " * 5000))
        assert too_long.error is not None and too_long.error.type == "too-large"
        assert (await client.request(CAPITAL)).error is None  # still serving


def test_a_missing_model_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve_processor("text-completion-llama-cpp") is LlamaCppProcessor
    missing = tmp_path / "absent.gguf"
    with pytest.raises(ConfigurationError, match="model_path"):
        backend.model_file(LlamaCppSettings.load({"id": "x", "model_path": missing}))

    def not_installed(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(ConfigurationError, match="local-llm") as raised:
        backend.model_file(LlamaCppSettings.load({"id": "x"}))
    assert "model_path" in str(raised.value)


def test_a_flows_model_and_temperature_apply_and_another_model_is_refused(
    tmp_path: Path,
) -> None:
    """TrustGraph's blueprint passes ``model`` and ``temperature`` to each flow."""
    from react_mem.llm.base import LLMError, Prompt

    gguf = tmp_path / "tiny-model.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: only the request arguments are built
    llama = backend.LlamaCppBackend(
        LlamaCppSettings.load({"id": "x", "model_path": gguf, "temperature": 0.1})
    )
    assert llama._arguments(Prompt(system="", prompt="hi"))["temperature"] == 0.1
    for own in ("tiny-model", "tiny-model.gguf"):
        args = llama._arguments(Prompt(system="", prompt="hi", model=own, temperature=0.7))
        assert args["temperature"] == 0.7
    with pytest.raises(LLMError, match=r"'gpt-4o'.*serves tiny-model only"):
        llama._arguments(Prompt(system="", prompt="hi", model="gpt-4o"))
