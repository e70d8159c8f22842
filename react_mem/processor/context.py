"""What a handler gets besides its message: the flow, the correlation id, a reply path."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from react_mem.bus.transport import Receipt
from react_mem.errors import ConfigurationError
from react_mem.schema.base import WireModel

if TYPE_CHECKING:
    from react_mem.processor.flow import Flow


@dataclass(kw_only=True)
class MessageContext:
    flow: Flow
    #: The correlation id (message property ``id``); every reply carries it.
    id: str | None
    properties: dict[str, str] = field(default_factory=dict)
    redelivery_count: int = 0
    response: str | None = None

    async def reply(self, message: WireModel) -> None:
        """Send ``message`` on this consumer's response queue with the request's ``id``."""
        if self.response is None:
            raise ConfigurationError("this consumer declares no response queue")
        await self.flow.send(self.response, message, id=self.id)

    async def reply_queued(self, message: WireModel) -> Receipt:
        """:meth:`reply`, returning once ``message`` is queued behind the replies before it
        (:meth:`Flow.send_queued`): the result is the broker's receipt, to await later."""
        if self.response is None:
            raise ConfigurationError("this consumer declares no response queue")
        return await self.flow.send_queued(self.response, message, id=self.id)
