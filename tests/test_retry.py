"""The store/embedder retry wrapper: a plain first attempt, then tenacity's bounded retries."""

from __future__ import annotations

import asyncio

import pytest

from memory_services import retry
from memory_services.retry import ATTEMPTS, retrying
from react_mem.errors import BadRequest, TransientError


class Flaky:
    """Fails with ``error`` for the first ``failures`` calls, then returns the call count."""

    def __init__(self, failures: int, error: type[BaseException] = RuntimeError) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def __call__(self, value: str) -> tuple[str, int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return value, self.calls


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the waits instead of sleeping them."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)  # tenacity's waits too
    return waits


async def test_a_call_that_succeeds_is_made_once() -> None:
    call = Flaky(0)
    assert await retrying("store", call, "x") == ("x", 1)


@pytest.mark.parametrize("failures", range(1, ATTEMPTS))
async def test_transient_failures_are_retried_up_to_the_attempts(failures: int) -> None:
    call = Flaky(failures)
    assert await retrying("store", call, "x") == ("x", failures + 1)


async def test_the_waits_double_from_the_first(no_waits: list[float]) -> None:
    with pytest.raises(TransientError):
        await retrying("store", Flaky(ATTEMPTS), "x")
    assert no_waits == [retry.FIRST_WAIT * 2**n for n in range(ATTEMPTS - 1)]


async def test_exhausted_retries_name_the_dependency_and_keep_the_cause() -> None:
    call = Flaky(ATTEMPTS)
    with pytest.raises(TransientError, match=f"store failed after {ATTEMPTS} attempts") as err:
        await retrying("store", call, "x")
    assert call.calls == ATTEMPTS
    assert isinstance(err.value.__cause__, RuntimeError)
    assert str(err.value.__cause__) == f"failure {ATTEMPTS}"


async def test_bad_input_is_never_retried() -> None:
    call = Flaky(1, BadRequest)
    with pytest.raises(BadRequest):
        await retrying("store", call, "x")
    assert call.calls == 1


async def test_bad_input_on_a_retry_is_not_retried_again() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        raise (RuntimeError if calls == 1 else BadRequest)("no")

    with pytest.raises(BadRequest):
        await retrying("store", call)
    assert calls == 2
