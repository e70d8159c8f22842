"""The working-memory service over the real embedded broker, with a scripted LLM on the bus."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from memory_services.working.service import WorkingMemoryProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.rpc import RequestResponseClient
from react_mem.schema import AgentStep
from react_mem.schema.base import WireModel
from react_mem.schema.working import WorkingMemoryRequest, WorkingMemoryResponse
from react_mem.tokens import HFTokenCounter, count_steps
from tests.support.ping import flow_file
from tests.support.scripted_llm import (
    Script,
    ScriptedLLM,
    error_reply,
    replies,
    silent,
    start_scripted_llm,
)

pytestmark = pytest.mark.broker

SUMMARY = (
    "Called search(query=question 0) -> RESULT-0; calculator(query=question 1) -> RESULT-1. "
    "Decided to check the weather next."
)


@pytest.fixture(scope="module")
def counter() -> HFTokenCounter:
    return HFTokenCounter.from_file()


def steps_of(n: int, words: int = 20) -> list[AgentStep]:
    tools = ["search", "calculator", "weather"]
    return [
        AgentStep(
            thought=f"I should use {tools[i % 3]} for part {i}",
            action=tools[i % 3],
            arguments={"query": f"question {i}"},
            observation=f"RESULT-{i} " + "lorem ipsum " * words,
        )
        for i in range(n)
    ]


class LooseRequest(WireModel):
    """Sends whatever JSON types a test wants, to exercise the service's validation."""

    operation: Any = "compress"
    steps: Any = None
    threshold: Any = None
    keep_recent: Any = None


@dataclass
class Harness:
    llm: ScriptedLLM
    processor: WorkingMemoryProcessor
    client: RequestResponseClient[WireModel, WorkingMemoryResponse]

    async def compress(self, steps: list[AgentStep], **fields: Any) -> WorkingMemoryResponse:
        request = WorkingMemoryRequest(operation="compress", steps=steps, **fields)
        return await self.client.request(request)


@contextlib.asynccontextmanager
async def working_memory(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
    *,
    script: Script = silent,
    **settings: Any,
) -> AsyncIterator[Harness]:
    llm, llm_topics = await start_scripted_llm(transport, tmp_path, unique, script=script)
    pid = f"wm-{unique}"
    topics = {
        "request": f"request:tg:wm-{unique}",
        "response": f"response:tg:wm-{unique}",
        "text-completion-request": llm_topics["request"],
        "text-completion-response": llm_topics["response"],
    }
    config = {
        "id": pid,
        "flows": flow_file(tmp_path, pid, topics),
        # Short only where the model is silent, so that the timeout is what is tested: a
        # model that answers must never lose the race with it on a loaded machine.
        "llm_timeout": 0.3 if script is silent else 30.0,
        "llm_attempts": 2,
        "llm_retry_delay": 0.01,
    }
    wm_settings = WorkingMemoryProcessor.Settings.load(config | settings)
    processor = WorkingMemoryProcessor(wm_settings, transport, registry=registry, counter=counter)
    await processor.start()
    client: RequestResponseClient[WireModel, WorkingMemoryResponse] = RequestResponseClient(
        transport, topics["request"], topics["response"], WorkingMemoryResponse, timeout=15
    )
    await client.start()
    try:
        yield Harness(llm, processor, client)
    finally:
        await client.close()
        await processor.stop()
        await llm.stop()


async def test_older_steps_are_summarised_by_the_llm_and_recent_kept_verbatim(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
) -> None:
    steps = steps_of(8)
    async with working_memory(
        transport, registry, tmp_path, unique, counter, script=replies(SUMMARY)
    ) as wm:
        reply = await wm.compress(steps, threshold=500, keep_recent=3)
        assert reply.error is None
        assert reply.tokens_before == sum(count_steps(counter, steps)) > 500
        assert reply.tokens_after == sum(count_steps(counter, reply.steps)) <= 500
        assert reply.steps[1:] == steps[-3:]  # verbatim, in order
        assert (reply.summarised, reply.kept, reply.fallback) == (5, 3, False)
        summary = reply.steps[0]
        assert summary.step_type == "summary" and summary.observation == SUMMARY
        (request,) = wm.llm.requests
        for step in steps[:5]:  # every summarised tool call and result went to the LLM
            assert f"Action: {step.action}" in request.prompt
            assert step.observation.split()[0] in request.prompt
        assert "RESULT-5" not in request.prompt  # kept steps are not summarised
        assert "key result" in request.system and "decision" in request.system
    summarised = registry.get_sample_value(
        "tg_working_memory_compressions_total",
        {"processor": f"wm-{unique}", "outcome": "summarised"},
    )
    assert summarised == 1


async def test_under_threshold_and_empty_steps_come_back_unchanged(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
) -> None:
    async with working_memory(
        transport, registry, tmp_path, unique, counter, script=replies(SUMMARY)
    ) as wm:
        steps = steps_of(3)
        reply = await wm.compress(steps)  # default threshold 2000
        assert reply.steps == steps and reply.summarised == 0
        assert reply.tokens_before == reply.tokens_after == sum(count_steps(counter, steps))
        empty = await wm.compress([])
        assert empty.error is None and empty.steps == [] and empty.tokens_after == 0
        assert wm.llm.requests == []


async def test_default_threshold_and_keep_recent_come_from_settings(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
) -> None:
    async with working_memory(
        transport,
        registry,
        tmp_path,
        unique,
        counter,
        script=replies(SUMMARY),
        working_memory_threshold=250,
        keep_recent=1,
    ) as wm:
        steps = steps_of(6)
        reply = await wm.compress(steps)
        assert reply.tokens_after <= 250 < reply.tokens_before
        assert reply.steps[1:] == steps[-1:] and reply.kept == 1


@pytest.mark.parametrize(
    "script", [silent, replies(error_reply())], ids=["llm-silent", "llm-errors"]
)
async def test_llm_failure_falls_back_to_a_digest_that_says_what_was_cut(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
    script: Script,
) -> None:
    steps = steps_of(10, words=10)
    async with working_memory(transport, registry, tmp_path, unique, counter, script=script) as wm:
        reply = await wm.compress(steps, threshold=320, keep_recent=3)
        assert reply.error is None and reply.fallback is True
        assert reply.tokens_after == sum(count_steps(counter, reply.steps)) <= 320
        assert reply.steps[1:] == steps[-3:]
        digest = reply.steps[0].observation
        assert digest.startswith(
            "[working memory: 7 earlier steps omitted: actions search×3, calculator×2, weather×2]"  # noqa: RUF001
        )
        assert "- step 1: search(query=question 0) -> RESULT-0" in digest
        assert len(wm.llm.requests) == 2  # llm_attempts, then gave up
    fallbacks = registry.get_sample_value(
        "tg_working_memory_compressions_total",
        {"processor": f"wm-{unique}", "outcome": "fallback"},
    )
    assert fallbacks == 1


async def test_too_long_summary_is_re_asked_then_cut_to_the_threshold(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
) -> None:
    rambling = SUMMARY + " and then " + "more detail " * 800
    async with working_memory(
        transport, registry, tmp_path, unique, counter, script=replies(rambling)
    ) as wm:
        reply = await wm.compress(steps_of(8), threshold=500, keep_recent=3)
        assert reply.error is None and reply.fallback is False
        assert reply.tokens_after <= 500
        summary = reply.steps[0].observation
        assert summary.startswith(SUMMARY) and summary.endswith("[summary truncated]")
        first, second = wm.llm.requests
        assert "too long" not in first.prompt and "too long" in second.prompt


async def test_re_asked_summary_that_fits_is_used_whole(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
) -> None:
    script = replies("too much " * 900, SUMMARY)
    async with working_memory(transport, registry, tmp_path, unique, counter, script=script) as wm:
        reply = await wm.compress(steps_of(8), threshold=500, keep_recent=3)
        assert reply.steps[0].observation == SUMMARY and reply.tokens_after <= 500
        assert len(wm.llm.requests) == 2


async def test_recent_steps_over_the_threshold_keep_as_many_as_fit_and_say_so(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
) -> None:
    steps = steps_of(6, words=100)  # about 430 tokens each
    async with working_memory(
        transport, registry, tmp_path, unique, counter, script=replies(SUMMARY)
    ) as wm:
        reply = await wm.compress(steps, threshold=500, keep_recent=3)
        assert reply.tokens_after <= 500
        assert reply.kept == 1 and reply.steps[1:] == steps[-1:]
        assert reply.summarised == 5
        notice = reply.steps[0].observation
        assert notice.startswith("[working memory: 1 of 3 recent steps kept verbatim")
        assert SUMMARY in notice


def _raw(**fields: Any) -> LooseRequest:
    return LooseRequest(**fields)


@pytest.mark.parametrize(
    ("request_fields", "error_type", "mentions"),
    [
        ({"operation": "append"}, "bad-operation", "unknown operation 'append'"),
        ({"threshold": 0}, "invalid", "threshold"),
        ({"threshold": "lots"}, "invalid", "threshold"),
        ({"keep_recent": -1}, "invalid", "keep_recent"),
        ({"steps": "not a list"}, "invalid", "steps"),
        ({"steps": [{"arguments": {"x": [1]}}]}, "invalid", "arguments"),
        ({"steps": [{}] * 11}, "too-large", "too many steps"),
        ({"steps": [{"observation": "x " * 3000}]}, "too-large", "characters"),
    ],
)
async def test_bad_input_is_answered_with_an_error_and_service_keeps_serving(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    counter: HFTokenCounter,
    request_fields: dict[str, Any],
    error_type: str,
    mentions: str,
) -> None:
    async with working_memory(
        transport,
        registry,
        tmp_path,
        unique,
        counter,
        script=replies(SUMMARY),
        max_steps=10,
        max_input_chars=5000,
    ) as wm:
        fields = {"steps": [step.to_wire() for step in steps_of(2)]} | request_fields
        reply = await wm.client.request(_raw(**fields))
        assert reply.error is not None
        assert reply.error.type == error_type and mentions in reply.error.message
        assert reply.steps == []
        good = await wm.compress(steps_of(6), threshold=300)
        assert good.error is None and good.tokens_after <= 300
        assert wm.llm.requests  # the good request was summarised
