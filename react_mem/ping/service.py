"""The ping processor: replies to each request on its flow with who answered."""

from __future__ import annotations

from typing import ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ConsumerSpec, ProducerSpec
from react_mem.schema import Error
from react_mem.schema.ping import PingRequest, PingResponse


def _error_reply(error: Error) -> PingResponse:
    return PingResponse(error=error)


class PingProcessor(Processor):
    default_id: ClassVar[str] = "ping"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.register_specification(
            ConsumerSpec(
                name="request",
                schema=PingRequest,
                handler=self.on_ping,
                response="response",
                error_reply=_error_reply,
            )
        )
        self.register_specification(ProducerSpec(name="response", schema=PingResponse))

    async def on_ping(self, request: PingRequest, ctx: MessageContext) -> None:
        await ctx.reply(
            PingResponse(
                message=request.message,
                processor=self.id,
                workspace=ctx.flow.workspace,
                flow=ctx.flow.name,
            )
        )
