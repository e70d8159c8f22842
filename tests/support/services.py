"""A test double of any request/response service on the bus: a real processor answering
each request of ``request_schema`` with what ``answer`` returns; every request is kept."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from react_mem.bus.transport import Transport
from react_mem.processor.base import Processor
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.base import WireModel
from tests.support.ping import flow_file


class Service(Processor):
    default_id: ClassVar[str] = "service-double"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        request_schema: type[WireModel],
        response_schema: type[WireModel],
        answer: Callable[[Any], WireModel],
        registry: CollectorRegistry | None = None,
    ) -> None:
        super().__init__(settings, transport, registry=registry)
        self.answer = answer
        self.requests: list[Any] = []
        self.serve_requests(request_schema, response_schema, self.on_request)

    async def on_request(self, request: Any, ctx: MessageContext) -> None:
        self.requests.append(request)
        await ctx.reply(self.answer(request))


@contextlib.asynccontextmanager
async def service_double(
    transport: Transport,
    tmp_path: Path,
    name: str,
    topics: dict[str, str],
    request_schema: type[WireModel],
    response_schema: type[WireModel],
    answer: Callable[[Any], WireModel],
) -> AsyncIterator[Service]:
    """A started :class:`Service` on ``topics`` (``request``, ``response``)."""
    settings = ProcessorSettings.load({"id": name, "flows": flow_file(tmp_path, name, topics)})
    service = Service(
        settings,
        transport,
        request_schema=request_schema,
        response_schema=response_schema,
        answer=answer,
        registry=CollectorRegistry(),
    )
    await service.start()
    try:
        yield service
    finally:
        await service.stop()
