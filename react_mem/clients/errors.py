"""Error replies and transport failures, mapped to the project's exceptions.

Every client call goes through :func:`boundary` (what the bus and the reply's decoding can
raise) and :func:`raise_for` (the reply's ``Error``), so a caller catches one hierarchy
under :class:`~react_mem.errors.ReactMemError`, whatever the transport underneath raised.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pydantic import ValidationError

from react_mem.errors import (
    BadReply,
    BadRequest,
    BusError,
    Forbidden,
    LLMError,
    LLMUnavailable,
    NotFound,
    QuotaExceeded,
    RequestTimeout,
    ServiceDiskFull,
    ServiceError,
    ServiceFailed,
    ServiceRefused,
    ServiceTimeout,
    ServiceUnavailable,
)
from react_mem.schema.errors import ErrorType
from react_mem.schema.primitives import Error

#: The exception for each error type; any other known type is a :class:`ServiceRefused`.
EXCEPTIONS: Mapping[ErrorType | str, type[ServiceError]] = {
    "not-found": NotFound,
    "forbidden": Forbidden,
    "quota-exceeded": QuotaExceeded,
    "processing-failed": ServiceFailed,
    "disk-full": ServiceDiskFull,
    "llm-error": LLMUnavailable,
}


def exception_for(service: str, error: Error) -> ServiceError:
    """The exception for ``service``'s error reply. Any type not in :data:`EXCEPTIONS` is
    the service's final word (:class:`ServiceRefused`), a type no react-mem service sends (a
    TrustGraph peer's own) included."""
    message = f"{service}: {error.type}: {error.message}"
    cls = EXCEPTIONS.get(error.type, ServiceRefused)
    return cls(message, service=service, type=error.type, detail=error.message)


def raise_for(service: str, error: Error | None) -> None:
    """Nothing for no error, else the exception for it."""
    if error is not None:
        raise exception_for(service, error)


@contextmanager
def boundary(service: str, *, llm: bool = False) -> Iterator[None]:
    """Map what a request/response exchange can raise to the project's exceptions.

    With ``llm``, unavailability becomes :class:`LLMUnavailable` and a bad reply
    :class:`LLMError`, the two a text-completion caller handles.
    """
    unavailable = LLMUnavailable if llm else ServiceUnavailable
    try:
        yield
    except ServiceError:
        raise
    except (RequestTimeout, TimeoutError) as exc:
        if llm:
            raise LLMUnavailable(f"{service}: no reply: {exc}", service=service) from exc
        raise ServiceTimeout(f"{service}: no reply: {exc}", service=service) from exc
    except BusError as exc:
        raise unavailable(f"{service}: {exc}", service=service, type="processing-failed") from exc
    except (BadRequest, ValidationError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        # A reply that did not decode, or a request our own arguments made invalid.
        bad = LLMError if llm else BadReply
        raise bad(f"{service}: unusable reply: {exc}", service=service, type="malformed") from exc
    except (ConnectionError, OSError) as exc:
        raise unavailable(f"{service}: {exc!r}", service=service, type="processing-failed") from exc
