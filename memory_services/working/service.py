"""The working-memory processor: ``compress`` an invocation's steps to a token threshold.

Older steps are summarised by the flow's text-completion service (TrustGraph's
``text-completion-request`` / ``text-completion-response`` spec names); see
:mod:`memory_services.working.compress` for the rules. Nothing is stored: a redelivered
request is simply compressed again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar, assert_never

from prometheus_client import CollectorRegistry, Counter
from pydantic import Field

from memory_services.working.compress import Compression, Policy, compress
from memory_services.working.llm import LLMSummariser
from react_mem.bus.transport import Transport
from react_mem.clients.llm import TEXT_COMPLETION, TextCompletionClient
from react_mem.errors import BadRequest
from react_mem.metrics import per_registry
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.started import Started
from react_mem.schema.working import (
    MAX_WORKING_STEPS,
    WorkingMemoryRequest,
    WorkingMemoryResponse,
)
from react_mem.tokens import (
    HFTokenCounter,
    TokenCounter,
    count_steps,
    render_step,
)


class WorkingMemorySettings(ProcessorSettings):
    #: Default threshold in tokens (agent-mem ``working-memory-threshold``).
    working_memory_threshold: int = Field(default=2000, gt=0)
    #: Default number of recent steps kept verbatim.
    keep_recent: int = Field(default=3, ge=0)
    #: A local ``tokenizer.json`` (Hugging Face ``tokenizers`` format), ideally the LLM's
    #: own; default: the WordPiece tokenizer bundled with all-MiniLM-L6-v2, an estimate.
    tokenizer: Path | None = None
    #: Room always left for the summary step when recent steps are dropped to fit.
    min_summary_tokens: int = Field(default=64, ge=1)
    #: Seconds to wait for one text completion; attempts per summary; first backoff.
    llm_timeout: float = Field(default=30.0, gt=0)
    llm_attempts: int = Field(default=3, ge=1, le=10)
    llm_retry_delay: float = Field(default=0.5, ge=0)
    #: Seconds all LLM calls of one request may take together, then the fallback is used.
    #: Callers of this service should wait longer than this.
    llm_deadline: float = Field(default=60.0, gt=0)
    #: Most tokens of old steps put into one summary prompt (longer ones are cut evenly).
    llm_max_input_tokens: int = Field(default=8000, ge=64)
    #: Ask once more, more strictly, when a summary comes back over its budget.
    reask_on_overflow: bool = True
    #: Request limits; larger requests are refused as bad input.
    max_steps: int = Field(default=1000, ge=1, le=MAX_WORKING_STEPS)
    max_input_chars: int = Field(default=200_000, ge=1)


_compressions = per_registry(
    lambda registry: Counter(
        "tg_working_memory_compressions_total",
        "Working-memory compress requests by outcome",
        ["processor", "outcome"],
        registry=registry,
    )
)


class WorkingMemoryProcessor(Processor):
    Settings: ClassVar[type[ProcessorSettings]] = WorkingMemorySettings
    #: Of the ``Settings`` class (:class:`Processor` revalidates what it is given as it).
    settings: WorkingMemorySettings
    default_id: ClassVar[str] = "working-memory"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        """``counter``: default the tokenizer of ``settings.tokenizer``, loaded by start()."""
        super().__init__(settings, transport, registry=registry)
        self._given_counter = counter
        #: The token counter, loaded once by start(); handlers get it first.
        self.started: Started[TokenCounter] = Started(self.id)
        self._outcomes = _compressions(registry)
        self.serve_requests(
            WorkingMemoryRequest, WorkingMemoryResponse, self.started.bind(self.on_request)
        )
        self.register_specification(TEXT_COMPLETION.spec(timeout=self.settings.llm_timeout))

    async def start(self) -> None:
        counter = self._given_counter
        if counter is None:
            counter = await asyncio.to_thread(HFTokenCounter.from_file, self.settings.tokenizer)
        self.started.open(counter)
        await super().start()

    async def on_request(
        self, counter: TokenCounter, request: WorkingMemoryRequest, ctx: MessageContext
    ) -> None:
        match request.operation:
            case "compress":
                await ctx.reply(await self._compress(counter, request, ctx))
            case _:
                assert_never(request.operation)

    async def _compress(
        self, counter: TokenCounter, request: WorkingMemoryRequest, ctx: MessageContext
    ) -> WorkingMemoryResponse:
        self._check_size(request)
        settings = self.settings
        policy = Policy(
            threshold=request.threshold or settings.working_memory_threshold,
            keep_recent=(
                settings.keep_recent if request.keep_recent is None else request.keep_recent
            ),
            min_summary_tokens=settings.min_summary_tokens,
            reask_on_overflow=settings.reask_on_overflow,
        )
        summariser = LLMSummariser(
            TextCompletionClient.of(ctx.flow),
            counter,
            attempts=settings.llm_attempts,
            retry_delay=settings.llm_retry_delay,
            max_input_tokens=settings.llm_max_input_tokens,
            timeout=settings.llm_timeout,
            deadline=settings.llm_deadline,
        )
        # Counting a large request takes a while: off the event loop (tokenizers drops the GIL).
        counts = await asyncio.to_thread(count_steps, counter, request.steps)
        result = await compress(request.steps, policy, counter, summariser, counts=counts)
        self._outcomes.labels(processor=self.id, outcome=_outcome(result)).inc()
        return WorkingMemoryResponse(
            steps=result.steps,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            summarised=result.summarised,
            fallback=result.fallback,
            kept=result.kept,
        )

    def _check_size(self, request: WorkingMemoryRequest) -> None:
        limit = self.settings
        if len(request.steps) > limit.max_steps:
            raise BadRequest(
                f"too many steps: {len(request.steps)} > {limit.max_steps}", type="too-large"
            )
        chars = sum(len(render_step(s)) for s in request.steps)
        if chars > limit.max_input_chars:
            raise BadRequest(
                f"steps too large: {chars} characters > {limit.max_input_chars}",
                type="too-large",
            )


def _outcome(result: Compression) -> str:
    if result.summarised == 0:
        return "unchanged"
    return "fallback" if result.fallback else "summarised"
