"""Bounded retries for store and embedder calls (DESIGN §5: retry, then fail, never hang).

Bad input (:class:`BadRequest`) is never retried; anything else is retried a few times with
exponential backoff and then surfaces as :class:`TransientError`, so the consumer
redelivers the message and finally answers it with an error.

The first attempt is a plain ``await``: tenacity's machinery costs ≈25 µs a call, as much as
a store call itself, and a call that succeeds needs none of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from react_mem.errors import BadRequest, TransientError

P = ParamSpec("P")
T = TypeVar("T")

ATTEMPTS = 3
#: Seconds before the second attempt; each later wait doubles (at most 1 s).
FIRST_WAIT = 0.05


async def retrying(
    what: str, call: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``await call(*args, **kwargs)``, retried; ``what`` names the dependency in the error."""
    try:
        return await call(*args, **kwargs)
    except BadRequest:
        raise
    except BaseException:  # noqa: BLE001 - as tenacity would: retried (cancellation included)
        await asyncio.sleep(FIRST_WAIT)
    try:
        async for attempt in AsyncRetrying(  # attempts 2.., waits doubling from 2*FIRST_WAIT
            stop=stop_after_attempt(ATTEMPTS - 1),
            wait=wait_exponential(multiplier=2 * FIRST_WAIT, max=1.0),
            retry=retry_if_not_exception_type(BadRequest),
        ):
            with attempt:
                return await call(*args, **kwargs)
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        raise TransientError(f"{what} failed after {ATTEMPTS} attempts: {cause!r}") from cause
    raise AssertionError("unreachable")  # pragma: no cover
