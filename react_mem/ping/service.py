"""The ping processor: replies to each request on its flow with who answered."""

from __future__ import annotations

from typing import ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.ping import PingRequest, PingResponse


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
        self.serve_requests(PingRequest, PingResponse, self.on_ping)

    async def on_ping(self, request: PingRequest, ctx: MessageContext) -> None:
        await ctx.reply(
            PingResponse(
                message=request.message,
                processor=self.id,
                workspace=ctx.flow.workspace,
                flow=ctx.flow.name,
            )
        )
