"""Text-completion processors: TrustGraph's TextCompletion request/response over the bus.

A backend turns a :class:`Prompt` into a :class:`Completion` (or a stream of them); the
processor validates requests, retries transient backend failures with bounded backoff,
replies (one response, or chunks then a final ``end_of_stream``) and records metrics.
A backend failure that outlasts the retries is answered with ``Error(type="llm-error")``,
never redelivered: a stream already partly sent cannot be taken back. These retries are the
only ones between a caller and the model (the SDK's are off; callers do not retry): a
request's ``timeout`` bounds them all, and the error comes before it runs out.

A flow's ``model`` and ``temperature`` parameters (TrustGraph's blueprint passes them, as
strings, to each ``text-completion:{id}``) override the processor's settings for requests on
that flow; a backend that cannot serve the named model answers an ``llm-error``.

The processor receives up to ``concurrency`` requests but generates ``parallel`` at once;
the rest wait at a :class:`PriorityGate`, where the learner's ``background`` requests go
after everyone else's, so an ask never queues behind background learning. The caller's
``timeout`` bounds that wait too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from prometheus_client import CollectorRegistry
from pydantic import Field
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    stop_never,
    wait_exponential,
)

from react_mem.bus.transport import Transport
from react_mem.errors import BadRequest, ReactMemError
from react_mem.errors import LLMError as LLMError  # re-exported for the backends
from react_mem.errors import LLMUnavailable as LLMUnavailable
from react_mem.llm.gate import PriorityGate
from react_mem.llm.metrics import LLMMetrics
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.schema import Error, TextCompletionRequest, TextCompletionResponse

logger = logging.getLogger(__name__)

T = TypeVar("T")


# A backend's failures: LLMError for good (a refused request, a broken model: answered, not
# retried), LLMUnavailable when worth retrying (connection, timeout, 429, 5xx).


@dataclass(frozen=True, kw_only=True)
class Prompt:
    system: str
    prompt: str
    #: Constrained JSON output requested; ``schema`` (a JSON Schema) narrows it further.
    json: bool = False
    schema: dict[str, Any] | None = None
    #: The flow's ``model`` and ``temperature`` parameters; ``None``: the backend's own.
    model: str | None = None
    temperature: float | None = None

    def messages(self) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": self.prompt}]


@dataclass(frozen=True, kw_only=True)
class Completion:
    """A completion, or one streamed piece of it (token counts usually on the last)."""

    text: str
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None


class LLMBackend(Protocol):
    """One LLM. ``start`` does the I/O (connect, load); calls may raise :class:`LLMError`."""

    model: str

    async def start(self) -> None: ...

    async def complete(self, prompt: Prompt) -> Completion: ...

    def stream(self, prompt: Prompt) -> AsyncGenerator[Completion, None]: ...

    async def close(self) -> None: ...


@dataclass
class Tries:
    """How one request's attempts went, for its error message."""

    count: int = 0
    last: str = ""

    def __str__(self) -> str:
        return f"{self.count} attempt{'s' if self.count != 1 else ''}"


class LLMSettings(ProcessorSettings):
    temperature: float = Field(default=0.0, ge=0, le=2)
    #: Attempts per request for transient failures, and the first backoff (doubling).
    llm_attempts: int = Field(default=3, ge=1, le=10)
    llm_retry_delay: float = Field(default=0.5, ge=0)
    llm_max_retry_delay: float = Field(default=8.0, ge=0)
    #: Longest system + prompt accepted, in characters; longer requests are refused.
    max_input_chars: int = Field(default=200_000, ge=1)
    #: Generations at once (default: ``concurrency``). Requests received beyond it wait for
    #: a slot, background (learner) requests after the others.
    parallel: int | None = Field(default=None, ge=1, le=1000)


#: Gate rank per request priority: lower is served first.
RANKS = {None: 0, "normal": 0, "background": 1}


class TextCompletionProcessor(Processor, ABC):
    """Serves ``TextCompletionRequest`` on the flow's ``request`` queue with an
    :class:`LLMBackend`."""

    Settings: ClassVar[type[ProcessorSettings]] = LLMSettings
    #: Of the ``Settings`` class (:class:`Processor` revalidates what it is given as it).
    settings: LLMSettings
    default_id: ClassVar[str] = "text-completion"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.llm_settings = self.settings
        self.backend = self.create_backend()
        self.llm_metrics = LLMMetrics(registry, self.id)
        self.gate = PriorityGate(self.llm_settings.parallel or self.llm_settings.concurrency)
        # Error replies end the stream, so streaming callers stop waiting.
        self.register_specification(
            ConsumerSpec(
                name="request",
                schema=TextCompletionRequest,
                handler=self.on_request,
                response="response",
                error_reply=lambda e: TextCompletionResponse(error=e, end_of_stream=True),
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=TextCompletionResponse))

    @abstractmethod
    def create_backend(self) -> LLMBackend:
        """The backend this processor serves (built from ``self.llm_settings``)."""

    async def start(self) -> None:
        await self.backend.start()
        try:
            await super().start()
        except BaseException:
            await self.backend.close()
            raise

    async def stop(self) -> None:
        await super().stop()
        await self.backend.close()

    # -- requests ------------------------------------------------------------------
    def parse(
        self, request: TextCompletionRequest, parameters: dict[str, Any] | None = None
    ) -> Prompt:
        """The request as a :class:`Prompt`, with its flow's ``parameters`` applied."""
        if not request.prompt.strip() and not request.system.strip():
            raise BadRequest("prompt and system are both empty")
        size = len(request.prompt) + len(request.system)
        if size > self.llm_settings.max_input_chars:
            raise BadRequest(
                f"prompt and system are {size} characters; the limit is "
                f"{self.llm_settings.max_input_chars}",
                type="too-large",
            )
        if request.response_format not in (None, "", "text", "json"):
            raise BadRequest(
                f"response_format {request.response_format!r} is not supported; "
                "use 'json' or leave it empty"
            )
        json_wanted = request.response_format == "json" or request.schema_ is not None
        model, temperature = flow_parameters(parameters or {})
        return Prompt(
            system=request.system,
            prompt=request.prompt,
            json=json_wanted,
            schema=request.schema_,
            model=model,
            temperature=temperature,
        )

    async def on_request(self, request: TextCompletionRequest, ctx: MessageContext) -> None:
        prompt = self.parse(request, ctx.flow.definition.parameters)
        model = prompt.model or self.backend.model
        started = time.monotonic()
        tries = Tries()
        try:
            final = await self._complete(request, prompt, ctx, tries)
        except LLMError as exc:
            self.llm_metrics.failed(model)
            logger.warning("%s: completion failed: %s", self.id, exc)
            await ctx.reply(
                TextCompletionResponse(
                    error=Error(type="llm-error", message=str(exc)),
                    model=model,
                    end_of_stream=True,
                )
            )
            return
        self.llm_metrics.completed(final, time.monotonic() - started, model)

    async def _complete(
        self, request: TextCompletionRequest, prompt: Prompt, ctx: MessageContext, tries: Tries
    ) -> Completion:
        """Every attempt, within the caller's ``timeout`` when it gives one."""
        try:
            async with asyncio.timeout(request.timeout), self.gate.slot(RANKS[request.priority]):
                if request.streaming:
                    return await self._stream(prompt, ctx, tries, request.timeout)
                final = await self._retrying(
                    lambda: self.backend.complete(prompt), tries, request.timeout
                )
                await ctx.reply(self._response(final, end=True))
                return final
        except TimeoutError:
            # Only the timeout above: the backend's own timeouts arrive as LLMError.
            last = f"; last: {tries.last}" if tries.last else ""
            waited = ", waiting for a generation slot" if not tries.count else ""
            message = (
                f"no completion within the caller's {request.timeout:.3g}s ({tries}{waited}{last})"
            )
            raise LLMError(message) from None
        except LLMError as exc:
            raise LLMError(f"{exc} ({tries})") from exc

    async def _stream(
        self, prompt: Prompt, ctx: MessageContext, tries: Tries, budget: float | None
    ) -> Completion:
        sent = False
        text: list[str] = []
        last = Completion(text="")

        async def attempt() -> Completion:
            nonlocal sent, last
            pieces = self.backend.stream(prompt)
            async with contextlib.aclosing(pieces):
                while True:
                    piece = await self._guard(anext(pieces, None))
                    if piece is None:
                        break
                    last = piece
                    if piece.text:
                        text.append(piece.text)
                        await ctx.reply(self._response(piece, end=False, counts=False))
                        sent = True
            await ctx.reply(self._response(last, end=True, text=""))
            return Completion(text="".join(text), in_token=last.in_token, out_token=last.out_token)

        # Retry only while nothing has been sent: a caller cannot unsee a chunk.
        return await self._retrying(attempt, tries, budget, can_retry=lambda: not sent)

    async def _retrying(
        self,
        call: Callable[[], Awaitable[T]],
        tries: Tries,
        budget: float | None,
        can_retry: Callable[[], bool] = lambda: True,
    ) -> T:
        """``call`` until it succeeds, fails for good, runs out of attempts, or the next
        attempt would start after ``budget`` seconds (then the last failure is raised)."""
        settings = self.llm_settings

        def transient(exc: BaseException) -> bool:
            tries.last = str(exc)
            return isinstance(exc, LLMUnavailable) and can_retry()

        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(settings.llm_attempts)
            | (stop_before_delay(budget) if budget is not None else stop_never),
            wait=wait_exponential(
                multiplier=settings.llm_retry_delay, max=settings.llm_max_retry_delay
            ),
            retry=retry_if_exception(transient),
            before_sleep=lambda state: logger.warning(
                "%s: attempt %d failed, retrying: %s",
                self.id,
                state.attempt_number,
                state.outcome.exception() if state.outcome else None,
            ),
            reraise=True,
        ):
            with attempt:
                tries.count += 1
                return await self._guard(call())
        raise AssertionError("unreachable")  # pragma: no cover

    async def _guard(self, call: Awaitable[T]) -> T:
        """Await a backend call; anything it raises besides :class:`LLMError` becomes one."""
        try:
            return await call
        except ReactMemError:
            raise
        except Exception as exc:
            logger.exception("%s: backend error", self.id)
            raise LLMError(f"{type(exc).__name__}: {exc}") from exc

    def _response(
        self, completion: Completion, *, end: bool, counts: bool = True, text: str | None = None
    ) -> TextCompletionResponse:
        return TextCompletionResponse(
            response=completion.text if text is None else text,
            in_token=completion.in_token if counts else None,
            out_token=completion.out_token if counts else None,
            model=completion.model or self.backend.model,
            end_of_stream=end,
        )


def flow_parameters(parameters: dict[str, Any]) -> tuple[str | None, float | None]:
    """A flow's ``model`` and ``temperature`` (strings in TrustGraph's flow config; empty
    means unset). A temperature that is not a number in [0, 2] is refused."""
    model = str(parameters.get("model") or "").strip() or None
    raw = parameters.get("temperature")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return model, None
    try:
        temperature = float(raw)
    except (TypeError, ValueError):
        raise BadRequest(f"flow parameter temperature {raw!r} is not a number") from None
    if not 0 <= temperature <= 2:
        raise BadRequest(f"flow parameter temperature {raw!r} is outside [0, 2]")
    return model, temperature
