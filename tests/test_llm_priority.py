"""The agent goes first: on a text-completion processor that generates one completion at a
time, an agent's request waiting for the model is served before queued learner
(``priority="background"``) requests, over the real embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.learner.llm import JsonLLM
from react_mem.llm.base import Completion, LLMBackend, LLMSettings, Prompt, TextCompletionProcessor
from react_mem.llm.llama_cpp import LlamaCppSettings
from react_mem.schema import TextCompletionRequest, TextCompletionResponse
from tests.support.ping import flow_file
from tests.support.recording import eventually

Client = RequestResponseClient[TextCompletionRequest, TextCompletionResponse]


class HeldBackend:
    """Notes each prompt as its generation starts; generations wait until ``go`` is set."""

    model = "held"

    def __init__(self) -> None:
        self.started: list[str] = []
        self.go = asyncio.Event()

    async def start(self) -> None:
        pass

    async def complete(self, prompt: Prompt) -> Completion:
        self.started.append(prompt.prompt)
        await self.go.wait()
        return Completion(text=f"done {prompt.prompt}")

    async def stream(self, prompt: Prompt) -> AsyncGenerator[Completion, None]:
        yield await self.complete(prompt)

    async def close(self) -> None:
        pass


class HeldProcessor(TextCompletionProcessor):
    def create_backend(self) -> LLMBackend:
        return HeldBackend()


@contextlib.asynccontextmanager
async def held_llm(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[tuple[HeldProcessor, HeldBackend, Client]]:
    pid = f"held-{unique}"
    topics = {"request": f"request:tg:tc-{unique}", "response": f"response:tg:tc-{unique}"}
    # Received many at once, generated one at a time: what the llama.cpp processor does.
    settings = LLMSettings.load(
        {"id": pid, "flows": flow_file(tmp_path, pid, topics), "concurrency": 8, "parallel": 1}
    )
    processor = HeldProcessor(settings, transport, registry=registry)
    await processor.start()
    client: Client = RequestResponseClient(
        transport, topics["request"], topics["response"], TextCompletionResponse, timeout=60
    )
    await client.start()
    backend = processor.backend
    assert isinstance(backend, HeldBackend)
    try:
        yield processor, backend, client
    finally:
        backend.go.set()
        await client.close()
        await processor.stop()


def background(name: str, timeout: float | None = None) -> TextCompletionRequest:
    return TextCompletionRequest(prompt=name, priority="background", timeout=timeout)


@pytest.mark.broker
async def test_an_agent_request_is_served_before_queued_learner_requests(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with held_llm(transport, registry, tmp_path, unique) as (processor, backend, client):
        first = asyncio.create_task(client.request(background("learn-1")))
        await eventually(lambda: backend.started == ["learn-1"])
        queued = [asyncio.create_task(client.request(background(f"learn-{i}"))) for i in (2, 3)]
        await eventually(lambda: processor.gate.waiting == 2)
        ask = asyncio.create_task(client.request(TextCompletionRequest(prompt="ask")))
        await eventually(lambda: processor.gate.waiting == 3)
        assert backend.started == ["learn-1"]  # one generation at a time

        backend.go.set()
        replies = await asyncio.gather(first, ask, *queued)

    assert [r.response for r in replies] == [
        "done learn-1",
        "done ask",
        "done learn-2",
        "done learn-3",
    ]
    assert all(r.error is None for r in replies)
    # The agent's request went next, ahead of the learner's requests queued before it.
    assert backend.started == ["learn-1", "ask", "learn-2", "learn-3"]


@pytest.mark.broker
async def test_a_request_waiting_for_a_slot_is_answered_within_its_timeout(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with held_llm(transport, registry, tmp_path, unique) as (processor, backend, client):
        first = asyncio.create_task(client.request(background("learn-1")))
        await eventually(lambda: backend.started == ["learn-1"])
        # The generation in progress never ends by itself: the waiter's deadline answers it.
        reply = await client.request(background("learn-2", timeout=0.5))
        assert reply.error is not None and reply.error.type == "llm-error"
        assert "waiting for a generation slot" in reply.error.message
        assert reply.end_of_stream and backend.started == ["learn-1"]
        assert processor.gate.waiting == 0

        backend.go.set()
        assert (await first).response == "done learn-1"


def test_llama_cpp_receives_more_requests_than_it_generates() -> None:
    settings = LlamaCppSettings(id="tc")
    assert settings.parallel == 1 and settings.concurrency > 1


async def test_the_learner_asks_in_the_background_within_its_own_wait() -> None:
    sent: list[TextCompletionRequest] = []

    async def complete(request: TextCompletionRequest, timeout: float) -> TextCompletionResponse:
        sent.append(request)
        return TextCompletionResponse(response='{"name": "x"}', end_of_stream=True)

    class Name(BaseModel):
        name: str

    assert await JsonLLM(complete, timeout=7.0).ask("s", "p", Name) == Name(name="x")
    assert [(r.priority, r.timeout) for r in sent] == [("background", 7.0)]
