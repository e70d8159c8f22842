"""The project's exception root and the errors that decide how a message is settled."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from react_mem.schema.errors import ErrorType


class ReactMemError(Exception):
    """Root of every error react-mem raises on purpose."""


class BadRequest(ReactMemError):
    """The message is malformed or invalid: answered with an error, never retried."""

    def __init__(self, message: str, *, type: ErrorType = "bad-request") -> None:
        super().__init__(message)
        self.type: str = type


class TransientError(ReactMemError):
    """A dependency failed in a way worth retrying (broker, store, LLM unavailable)."""


class NotStarted(TransientError):
    """A part was used before its ``start()`` finished (or after its ``stop()``): the one
    lifecycle error. Transient, so a message that reaches a handler too early is
    redelivered once the processor runs, never answered as bad input or bad config."""


class DiskFull(TransientError):
    """A write refused because the disk under a part's data is (nearly) full; nothing was
    written. A message on a persistent queue is kept and redelivered until space returns,
    never dead-lettered for it; a request is answered ``disk-full`` at once (see
    :mod:`react_mem.processor.consumer`)."""


class ConfigurationError(ReactMemError):
    """Settings or flow definitions are invalid; the message names the key."""


class BusError(TransientError):
    """The message bus could not be reached or refused an operation."""


class ConsumerClosed(BusError):
    """The consumer was closed (by its owner, or by the broker when its topic went away):
    receiving again on it can never succeed."""


class RequestTimeout(TransientError):
    """No response arrived for a request within its timeout."""


# -- what a client of a service raises (see react_mem.clients.errors for the mapping) --------


class ServiceError(ReactMemError):
    """A service did not serve a request: ``service`` names it, ``type`` is the
    ``Error.type`` of its error reply (or of the failure seen instead of one), ``detail``
    the reply's own message."""

    def __init__(
        self,
        message: str,
        *,
        service: str = "",
        type: str = "processing-failed",
        detail: str = "",
    ) -> None:
        super().__init__(message)
        self.service, self.type, self.detail = service, type, detail or message


class ServiceRefused(ServiceError, BadRequest):
    """The service refused the request for good (invalid, too large, ...): never retried."""


class NotFound(ServiceRefused):
    """What the request names does not exist in its scope."""


class Forbidden(ServiceRefused):
    """The requester may not do this (not the owner or an editor)."""


class QuotaExceeded(ServiceRefused):
    """The scope is full."""


class ServiceFailed(ServiceError, TransientError):
    """The service failed to serve the request (``processing-failed``): worth a retry."""


class ServiceDiskFull(ServiceFailed, DiskFull):
    """The service refused a write because its disk is (nearly) full (``disk-full``):
    nothing was written; ask again once space is freed."""


class ServiceUnavailable(ServiceError, TransientError):
    """No reply: the bus refused the request or the service is not there."""


class ServiceTimeout(ServiceUnavailable, RequestTimeout):
    """No reply within the caller's timeout."""


class BadReply(ServiceError):
    """The reply could not be read (not the schema, not JSON): a defect of the service."""


class LLMError(ServiceError):
    """No usable completion: an error reply, a malformed or empty one."""

    def __init__(
        self, message: str, *, service: str = "", type: str = "llm-error", detail: str = ""
    ) -> None:
        super().__init__(message, service=service, type=type, detail=detail)


class LLMUnavailable(LLMError, ServiceUnavailable):
    """The LLM did not answer (down, overloaded, past the deadline): worth a retry."""
