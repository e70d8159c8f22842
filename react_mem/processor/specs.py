"""What a processor declares per flow: consumers, producers and request/response clients.

Spec names are the keys of a flow definition's ``topics`` map, as in TrustGraph.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from react_mem.schema import Error
from react_mem.schema.base import WireModel

if TYPE_CHECKING:
    from react_mem.processor.context import MessageContext

Handler = Callable[[Any, "MessageContext"], Awaitable[None]]
ErrorReply = Callable[[Error], WireModel]


@dataclass(frozen=True, kw_only=True)
class ConsumerSpec:
    """Consume ``schema`` messages from the flow's ``name`` queue and call ``handler``.

    ``response`` names the producer spec that replies go to; with ``error_reply`` a
    message that fails (bad input, or retries exhausted) is answered with an error.
    ``optional`` consumers are skipped when the flow does not define their queue.
    """

    name: str
    schema: type[WireModel]
    handler: Handler
    response: str | None = None
    error_reply: ErrorReply | None = None
    optional: bool = False


@dataclass(frozen=True, kw_only=True)
class ProducerSpec:
    """``optional`` producers are skipped when the flow does not define their queue."""

    name: str
    schema: type[WireModel]
    optional: bool = False


@dataclass(frozen=True, kw_only=True)
class RequestResponseSpec:
    """A client of another service: requests on ``request``, responses on ``response``.

    ``optional`` clients are skipped when the flow does not define their queues. With
    ``resend``, a request is sent again every ``resend`` seconds (within ``timeout``) until
    the service has answered this client once: a service still starting drops what was
    sent before it subscribed. Only for services whose requests are idempotent.
    """

    request: str
    response: str
    request_schema: type[WireModel]
    response_schema: type[WireModel]
    timeout: float = 60.0
    optional: bool = False
    resend: float | None = None


Spec = ConsumerSpec | ProducerSpec | RequestResponseSpec
