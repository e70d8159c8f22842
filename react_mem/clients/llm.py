"""The text-completion client: one deadline, a retry policy, one error model.

Every failure is an :class:`~react_mem.errors.LLMError`: :class:`LLMUnavailable` when the
service did not answer in time, could not be reached or answered ``llm-error`` (worth a
retry), a plain :class:`LLMError` for a reply that cannot be used (malformed, refused,
empty where text is required). The service is told the caller's wait
(``TextCompletionRequest.timeout``, less a margin) so that it answers, with an error if
need be, before the caller stops waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from react_mem.clients.base import Requester, Service
from react_mem.clients.errors import boundary, exception_for
from react_mem.errors import LLMError, LLMUnavailable, RequestTimeout
from react_mem.processor.flow import Flow
from react_mem.schema.llm import TextCompletionRequest, TextCompletionResponse

TEXT_COMPLETION: Service[TextCompletionRequest, TextCompletionResponse] = Service(
    "text-completion", TextCompletionRequest, TextCompletionResponse
)
_NAME = TEXT_COMPLETION.name

#: Send one request and return its response, waiting at most the given seconds (what a
#: :class:`TextCompletionClient` can run over instead of the bus: in-process tests).
Complete = Callable[[TextCompletionRequest, float], Awaitable[TextCompletionResponse]]

#: Of the time left, what the service is told less, so its error arrives before the wait ends.
MARGIN = 0.1
MAX_MARGIN = 1.0


def _loop_time() -> float:
    now: float = asyncio.get_running_loop().time()
    return now


@dataclass(frozen=True)
class Deadline:
    """An instant on ``clock`` (the event loop's by default), ``seconds`` after it was set."""

    at: float
    seconds: float
    clock: Callable[[], float] = field(default=_loop_time, compare=False, repr=False)

    @classmethod
    def after(cls, seconds: float, *, clock: Callable[[], float] = _loop_time) -> Deadline:
        return cls(clock() + seconds, seconds, clock)

    def remaining(self) -> float:
        return max(0.0, self.at - self.clock())

    def expired(self) -> LLMUnavailable:
        return LLMUnavailable(
            f"no time left: no reply within the {self.seconds:g}s LLM deadline", service=_NAME
        )


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """``attempts`` calls at most, waiting ``delay`` after the first failure, doubling up to
    ``max_delay``. Only :class:`LLMError`s are retried, and none that would start past the
    deadline."""

    attempts: int = 1
    delay: float = 0.5
    max_delay: float = 10.0

    def wait(self, failures: int) -> float:
        return min(self.max_delay, self.delay * 2.0 ** (failures - 1))


ONCE = RetryPolicy()


class FunctionRequester:
    """The request/response seam answered by a :data:`Complete` function, which may raise
    what the bus raises (its failures are mapped like the bus's)."""

    def __init__(self, complete: Complete, *, timeout: float = 60.0) -> None:
        self._complete, self._timeout = complete, timeout

    async def request(
        self,
        message: TextCompletionRequest,
        *,
        timeout: float | None = None,
        sent: Callable[[], None] | None = None,
    ) -> TextCompletionResponse:
        if sent is not None:  # taken at once: no bus between
            sent()
        return await self._complete(message, self._timeout if timeout is None else timeout)

    async def stream(
        self,
        message: TextCompletionRequest,
        *,
        last: Callable[[Any], bool],
        timeout: float | None = None,
    ) -> AsyncIterator[TextCompletionResponse]:
        yield await self.request(message, timeout=timeout)


class TextCompletionClient:
    service = TEXT_COMPLETION

    def __init__(
        self,
        rpc: Requester[TextCompletionRequest, TextCompletionResponse],
        *,
        timeout: float | None = None,
        retry: RetryPolicy = ONCE,
    ) -> None:
        self._rpc = rpc
        self._timeout = timeout
        self._retry = retry

    @classmethod
    def of(
        cls, flow: Flow, *, timeout: float | None = None, retry: RetryPolicy = ONCE
    ) -> TextCompletionClient:
        """The client over ``flow``'s text-completion request/response client."""
        return cls(flow.client(TEXT_COMPLETION.request), timeout=timeout, retry=retry)

    @classmethod
    def over(
        cls, client: TextCompletionClient | Complete, *, retry: RetryPolicy = ONCE
    ) -> TextCompletionClient:
        """``client`` itself, or a client over the function ``client``."""
        if isinstance(client, TextCompletionClient):
            return client
        return cls(FunctionRequester(client), retry=retry)

    async def complete(
        self,
        request: TextCompletionRequest,
        *,
        deadline: Deadline | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        require_text: bool = False,
    ) -> TextCompletionResponse:
        """The completion. Each attempt waits at most ``timeout`` and all end by
        ``deadline``; with ``require_text`` an empty completion is a failure (retried)."""
        policy = retry or self._retry
        failures = 0
        while True:
            try:
                return await self._once(request, deadline, timeout, require_text)
            except LLMError:
                failures += 1
                if failures >= policy.attempts:
                    raise
                pause = policy.wait(failures)
                if deadline is not None and deadline.remaining() <= pause:
                    raise
                await asyncio.sleep(pause)

    async def _once(
        self,
        request: TextCompletionRequest,
        deadline: Deadline | None,
        timeout: float | None,
        require_text: bool,
    ) -> TextCompletionResponse:
        wait, request = self._bounded(request, deadline, timeout)
        try:
            with boundary(_NAME, llm=True):
                response = await self._rpc.request(request, timeout=wait)
        except LLMUnavailable as exc:
            if deadline is not None and _timed_out(exc) and deadline.remaining() <= 0.01:
                raise deadline.expired() from exc
            raise
        if response.error is not None:
            raise _llm_exception(response)
        if require_text and not response.response.strip():
            raise LLMError("empty completion", service=_NAME)
        return response

    async def stream(
        self, request: TextCompletionRequest, *, deadline: Deadline | None = None
    ) -> AsyncIterator[TextCompletionResponse]:
        """The completion as it is generated, until ``end_of_stream``; one attempt."""
        wait, request = self._bounded(request, deadline, None)
        request = request.model_copy(update={"streaming": True})

        def last(part: TextCompletionResponse) -> bool:
            return part.end_of_stream or part.error is not None

        with boundary(_NAME, llm=True):
            async for part in self._rpc.stream(request, last=last, timeout=wait):
                if part.error is not None:
                    raise _llm_exception(part)
                yield part

    def _bounded(
        self,
        request: TextCompletionRequest,
        deadline: Deadline | None,
        timeout: float | None,
    ) -> tuple[float | None, TextCompletionRequest]:
        """How long to wait (None: the request/response client's own timeout), and the
        request telling the service so (unless it says)."""
        wait = timeout or self._timeout
        if deadline is not None:
            left = deadline.remaining()
            if left <= 0:
                raise deadline.expired()
            wait = left if wait is None else min(wait, left)
            if request.timeout is None:
                told = min(left - min(left * MARGIN, MAX_MARGIN), 86_400.0)
                request = request.model_copy(update={"timeout": told})
        return wait, request


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc.__cause__, RequestTimeout | TimeoutError)


def _llm_exception(response: TextCompletionResponse) -> LLMError:
    assert response.error is not None
    error = exception_for(_NAME, response.error)
    if isinstance(error, LLMError):
        return error
    return LLMError(str(error), service=_NAME, type=error.type, detail=error.detail)
