"""Creating a broker endpoint (a connection, a producer, a consumer) with retries, as every
transport does: backoff doubling from 0.1 s to 5 s, until ``timeout``, then a BusError."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from react_mem.errors import BusError

T = TypeVar("T")


async def create_with_retries(
    make: Callable[[], Awaitable[T]],
    *,
    errors: tuple[type[BaseException], ...],
    timeout: float,
    failed: str,
    log: logging.Logger | None = None,
) -> T:
    """``make()``, retried on ``errors``; past ``timeout``, a BusError starting ``failed``.
    With ``log``, each retry is one warning line."""

    def warn(state: object) -> None:
        if log is not None:
            outcome = getattr(state, "outcome", None)
            log.warning("%s, retrying: %s", failed, outcome.exception() if outcome else "?")

    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(errors),
            wait=wait_exponential(multiplier=0.1, max=5.0),
            stop=stop_after_delay(timeout),
            before_sleep=warn,
            reraise=True,
        ):
            with attempt:
                return await make()
    except errors as exc:
        raise BusError(f"{failed}: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover
