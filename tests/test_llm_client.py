"""The one text-completion client: what the service is told, what is retried, and that no
attempt starts past the caller's deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from react_mem.clients.llm import Deadline, RetryPolicy, TextCompletionClient
from react_mem.errors import LLMError, LLMUnavailable, RequestTimeout
from react_mem.schema import Error, TextCompletionRequest, TextCompletionResponse

OVERLOADED = TextCompletionResponse(error=Error(type="llm-error", message="overloaded"))
REFUSED = TextCompletionResponse(error=Error(type="too-large", message="prompt too long"))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Service:
    """Answers each request with the next of ``answers`` (raising exceptions); a silent
    answer (a :class:`RequestTimeout`) takes the whole wait on ``clock``."""

    def __init__(self, *answers: TextCompletionResponse | Exception, clock: Clock) -> None:
        self.answers, self.clock = list(answers), clock
        self.sent: list[tuple[TextCompletionRequest, float | None]] = []

    async def request(
        self, message: TextCompletionRequest, *, timeout: float | None = None
    ) -> TextCompletionResponse:
        self.sent.append((message, timeout))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, RequestTimeout):
            self.clock.now += timeout or 0.0
        if isinstance(answer, Exception):
            raise answer
        return answer

    def stream(
        self,
        message: TextCompletionRequest,
        *,
        last: Callable[[Any], bool],
        timeout: float | None = None,
    ) -> AsyncIterator[TextCompletionResponse]:
        raise NotImplementedError


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    return waits


def client(*answers: TextCompletionResponse | Exception) -> tuple[TextCompletionClient, Service]:
    service = Service(*answers, clock=Clock())
    return TextCompletionClient(service), service


def deadline(service: Service, seconds: float) -> Deadline:
    clock: Callable[[], float] = service.clock
    return Deadline.after(seconds, clock=clock)


async def test_the_service_is_told_the_time_left_less_a_margin() -> None:
    llm, service = client(TextCompletionResponse(response="ok"))
    await llm.complete(TextCompletionRequest(prompt="p"), deadline=deadline(service, 5))
    ((sent, waited),) = service.sent
    assert waited == 5 and sent.timeout == pytest.approx(4.5)
    # A caller's own timeout on the request is kept (the learner tells its whole wait).
    await llm.complete(
        TextCompletionRequest(prompt="p", timeout=7.0), deadline=deadline(service, 9)
    )
    assert service.sent[-1][0].timeout == 7.0


async def test_only_llm_errors_are_retried_with_backoff(no_waits: list[float]) -> None:
    llm, service = client(
        OVERLOADED, RequestTimeout("silent"), TextCompletionResponse(response="ok")
    )
    policy = RetryPolicy(attempts=3, delay=0.5)
    reply = await llm.complete(TextCompletionRequest(prompt="p"), retry=policy)
    assert reply.response == "ok" and len(service.sent) == 3 and no_waits == [0.5, 1.0]


async def test_after_its_attempts_the_last_failure_is_raised() -> None:
    llm, service = client(OVERLOADED)
    with pytest.raises(LLMUnavailable, match="overloaded"):
        await llm.complete(TextCompletionRequest(prompt="p"), retry=RetryPolicy(attempts=2))
    assert len(service.sent) == 2
    llm, service = client(REFUSED)
    with pytest.raises(LLMError) as refused:
        await llm.complete(TextCompletionRequest(prompt="p"), retry=RetryPolicy(attempts=2))
    assert not isinstance(refused.value, LLMUnavailable) and refused.value.type == "too-large"


async def test_an_empty_completion_fails_where_text_is_required() -> None:
    llm, _ = client(TextCompletionResponse(response="  "))
    assert (await llm.complete(TextCompletionRequest(prompt="p"))).response == "  "
    with pytest.raises(LLMError, match="empty completion"):
        await llm.complete(TextCompletionRequest(prompt="p"), require_text=True)


async def test_no_attempt_starts_past_the_deadline(no_waits: list[float]) -> None:
    llm, service = client(RequestTimeout("silent"))
    with pytest.raises(LLMUnavailable, match="5s LLM deadline"):
        await llm.complete(
            TextCompletionRequest(prompt="p"),
            deadline=deadline(service, 5),
            timeout=3,
            retry=RetryPolicy(attempts=5, delay=0),
        )
    assert [waited for _, waited in service.sent] == [3, 2]  # the second cut to what was left
    # A backoff that would end past the deadline is not waited for.
    no_waits.clear()
    llm, service = client(OVERLOADED)
    with pytest.raises(LLMUnavailable, match="overloaded"):
        await llm.complete(
            TextCompletionRequest(prompt="p"),
            deadline=deadline(service, 1),
            retry=RetryPolicy(attempts=3, delay=2),
        )
    assert len(service.sent) == 1 and no_waits == []


async def test_a_spent_deadline_sends_nothing() -> None:
    llm, service = client(TextCompletionResponse(response="ok"))
    spent = deadline(service, 1)
    service.clock.now = 2
    with pytest.raises(LLMUnavailable, match="no time left"):
        await llm.complete(TextCompletionRequest(prompt="p"), deadline=spent)
    assert service.sent == []
