"""Bounded retries for store and embedder calls (DESIGN §5: retry, then fail, never hang).

Bad input (:class:`BadRequest`) is never retried; anything else is retried a few times with
exponential backoff and then surfaces as :class:`TransientError`, so the consumer
redelivers the message and finally answers it with an error.
"""

from __future__ import annotations

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


async def retrying(
    what: str, call: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``await call(*args, **kwargs)``, retried; ``what`` names the dependency in the error."""
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(ATTEMPTS),
            wait=wait_exponential(multiplier=0.05, max=1.0),
            retry=retry_if_not_exception_type(BadRequest),
        ):
            with attempt:
                return await call(*args, **kwargs)
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        raise TransientError(f"{what} failed after {ATTEMPTS} attempts: {cause!r}") from cause
    raise AssertionError("unreachable")  # pragma: no cover
