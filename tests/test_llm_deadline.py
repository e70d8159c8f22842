"""An LLM that fails or hangs costs one ask a bounded number of LLM calls, and the caller an
``llm-error`` within the agent's LLM deadline, never silence (issue 11, defect 3).

The real agent and the real OpenAI-compatible text-completion processor over the real
broker, against an HTTP server that answers 500 or holds requests unanswered. Before the
fix the agent's consumer redelivered the failed iteration 5 times on top of the
text-completion's 3 attempts (18 HTTP calls for one ask against a 500), and a hung model
kept the caller waiting 120 s per attempt.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.agent.service import AgentProcessor
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema import AgentResponse
from tests.support.llm_agent import llm_agent
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.broker

ATTEMPTS = 3
#: The agent's deadline in these tests; the caller waits longer than this for each message.
DEADLINE = 3.0
CALLER_WAIT = 4 * DEADLINE
#: The text-completion's own per-attempt timeout: far beyond the deadline, as by default.
HTTP_TIMEOUT = 600


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    running = OpenAIServer()
    running.start()
    yield running
    running.stop()


def settings(retry_delay: float = 0.01, **agent: object) -> dict[str, dict[str, object]]:
    llm = {"llm_attempts": ATTEMPTS, "llm_retry_delay": retry_delay, "timeout": HTTP_TIMEOUT}
    return {"llm": llm, "agent": {"llm_deadline": DEADLINE, **agent}}


def llm_error(responses: list[AgentResponse]) -> AgentResponse:
    """The one response the caller got: an ``llm-error`` that ends the dialog (type
    ``agent-error``, as agent-manager's errors; the kind leads the message), after the
    question's provenance."""
    explained, (only,) = responses[:1], responses[1:]
    assert [r.message_type for r in explained] == ["explain"]
    assert only.message_type == "error" and only.end_of_dialog
    assert only.error is not None and only.error.type == "agent-error"
    assert "llm-error: " in only.error.message
    return only


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streaming"])
async def test_failing_llm_costs_one_ask_its_attempts_then_an_llm_error(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
    streaming: bool,
) -> None:
    server.fail(500, times=ATTEMPTS)  # every attempt the one retrying layer makes
    async with llm_agent(transport, tmp_path, unique, server, **settings()) as stack:
        responses = await stack.ask("What is 2 + 2?", timeout=CALLER_WAIT, streaming=streaming)
        error = llm_error(responses)
        assert "500" in error.content and f"{ATTEMPTS} attempts" in error.content
        # The text-completion's attempts only: the agent neither retries nor is redelivered.
        assert len(server.requests) == ATTEMPTS

        # The endpoint has recovered; so has the stack: the next ask is answered.
        server.reply = lambda _: "Thought: simple sum\nFinal Answer: 4"
        (*_, answer) = await stack.ask("What is 2 + 2?", timeout=CALLER_WAIT)
        assert answer.message_type == "answer" and answer.content == "4"


async def test_hung_llm_is_answered_with_an_llm_error_within_the_deadline(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    server.hanging = True
    registry = CollectorRegistry()
    async with llm_agent(
        transport, tmp_path, unique, server, registry=registry, **settings()
    ) as stack:
        # The caller waits at most CALLER_WAIT for each message: silence would raise.
        error = llm_error(await stack.ask("What is 2 + 2?", timeout=CALLER_WAIT))
        # The service's answer, told the agent's deadline: "no completion within the
        # caller's 2.7s (1 attempt)".
        assert "caller's" in error.content and "(1 attempt)" in error.content
        # One HTTP call, cut off at the deadline: nothing retried it.
        assert len(server.requests) == 1
        outcome = registry.get_sample_value(
            "tg_agent_session_total", {"processor": stack.agent.id, "outcome": "llm-error"}
        )
        assert outcome == 1


async def test_one_hung_call_does_not_hold_the_other_callers(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    """With the backend's default concurrency, asks made during a hang each reach the LLM at
    once and each get their own answer by the deadline, not one deadline after another."""
    server.hanging = True
    async with llm_agent(transport, tmp_path, unique, server, **settings(concurrency=4)) as stack:
        asks = [stack.ask(f"question {n}", timeout=CALLER_WAIT) for n in range(4)]
        for responses in await asyncio.gather(*asks):
            llm_error(responses)
        assert len(server.requests) == 4  # all four were in flight together


async def test_retry_that_would_end_past_the_deadline_is_not_made(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    server.fail(500, times=ATTEMPTS)
    async with llm_agent(
        transport, tmp_path, unique, server, **settings(retry_delay=10 * DEADLINE)
    ) as stack:
        error = llm_error(await stack.ask("What is 2 + 2?", timeout=CALLER_WAIT))
        # The first failure itself, at once, not a timeout after a backoff past the deadline.
        assert "500" in error.content and "(1 attempt)" in error.content
        assert len(server.requests) == 1


async def test_silent_text_completion_service_still_gets_the_caller_an_llm_error(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    """No text-completion consumer at all: the agent's own wait ends at the deadline."""
    async with llm_agent(
        transport, tmp_path, unique, server, text_completion=False, **settings()
    ) as stack:
        error = llm_error(await stack.ask("Anyone there?", timeout=CALLER_WAIT))
        assert f"{DEADLINE:g}s LLM deadline" in error.content


async def test_workspace_llm_timeout_overrides_the_deadline(
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    server: OpenAIServer,
) -> None:
    server.hanging = True
    async with llm_agent(
        transport,
        tmp_path,
        unique,
        server,
        agent_mem={"llm-timeout": "1"},
        **settings(llm_deadline=3600),
    ) as stack:
        # The processor's hour does not apply: the workspace's 1 s does, less the margin
        # that gets the service's error to the agent before its own wait ends (0.9 s of what
        # is left when the call is made, after the memory recall of the same iteration).
        error = llm_error(await stack.ask("What is 2 + 2?", timeout=CALLER_WAIT))
        told = re.search(r"within the caller's ([0-9.]+)s", error.content)
        assert told is not None, error.content
        assert 0.5 < float(told.group(1)) <= 0.9


def test_deadline_setting_defaults_well_under_the_cli_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert AgentProcessor.Settings.load({"id": "a"}).llm_deadline == 60.0
    monkeypatch.setenv("REACT_MEM_LLM_DEADLINE", "7.5")
    assert AgentProcessor.Settings.load({"id": "a"}).llm_deadline == 7.5
