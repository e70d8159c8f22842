"""A test processor whose handler behaviour each test scripts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.schema.ping import PingRequest, PingResponse

Behaviour = Callable[[PingRequest, MessageContext], Awaitable[None]]


class RecordingProcessor(Processor):
    """Consumes ``input`` (PingRequest), calls ``behaviour``, replies on ``output``."""

    default_id: ClassVar[str] = "recording"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
        behaviour: Behaviour | None = None,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.behaviour = behaviour
        self.attempts: list[tuple[str, int]] = []  # (message, redelivery_count)
        self.done: list[str] = []
        self.register_specification(
            ConsumerSpec(
                name="input",
                schema=PingRequest,
                handler=self.on_input,
                response="output",
                error_reply=lambda e: PingResponse(error=e),
            )
        )
        self.register_specification(ProducerSpec(name="output", schema=PingResponse))

    async def on_input(self, request: PingRequest, ctx: MessageContext) -> None:
        self.attempts.append((request.message, ctx.redelivery_count))
        if self.behaviour is not None:
            await self.behaviour(request, ctx)
        self.done.append(request.message)
        await ctx.reply(PingResponse(message=request.message, processor=self.id))


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``check`` until true, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def settled(
    processor: RecordingProcessor, registry: CollectorRegistry, queue: str, *, undecodable: int = 0
) -> None:
    """Wait until nothing more can reach ``processor`` from the persistent ``queue``: every
    delivery it took (its handler's ``attempts``, plus ``undecodable`` ones that never reached
    the handler) is settled, acknowledged or handed back, and every one handed back has come
    round again.
    The broker delivers only what is unacknowledged, so with both accounts square nothing
    further can arrive; proven by counting, not by waiting a while to see."""
    labels = {"processor": processor.id, "consumer": queue}

    def count(name: str, **extra: str) -> int:
        return int(registry.get_sample_value(name, labels | extra) or 0)

    def square() -> bool:
        settlements = sum(count("tg_consumer_processing_total", status=s) for s in ("ok", "error"))
        handed_back = count("tg_consumer_redelivery_total")
        came_round = sum(1 for _, redelivery in processor.attempts if redelivery > 0)
        return settlements == len(processor.attempts) + undecodable and handed_back == came_round

    await eventually(square)
