"""A request's responses reach its caller in order and none is lost to a timeout: the
request/response client's waiter (one future per wait, in place of a queue read under
``asyncio.wait_for``) keeps what a queue kept.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from react_mem.bus.rpc import _Waiter
from react_mem.schema.ping import PingResponse


def response(n: int) -> PingResponse:
    return PingResponse(message=str(n))


@given(st.lists(st.booleans(), min_size=1, max_size=30))
def test_responses_come_out_in_the_order_they_came_in(waits: list[bool]) -> None:
    """Each response either finds its caller waiting or is held until it asks."""

    async def run() -> list[str]:
        waiter, got = _Waiter(), []
        for n, caller_waits in enumerate(waits):
            if caller_waits:
                getting = asyncio.ensure_future(waiter.get())
                await asyncio.sleep(0)
                waiter.put(response(n))
                got.append(await getting)
            else:
                waiter.put(response(n))
        while len(got) < len(waits):
            got.append(await waiter.get())
        return [str(getattr(item, "message", item)) for item in got]

    assert asyncio.run(run()) == [str(n) for n in range(len(waits))]


async def test_a_response_handed_to_a_caller_cancelled_before_it_ran_is_kept() -> None:
    waiter = _Waiter()
    getting = asyncio.ensure_future(waiter.get())
    await asyncio.sleep(0)
    waiter.put(response(1))  # handed over: the caller's task is due to resume with it
    getting.cancel()  # a timeout firing in the same turn of the loop
    with pytest.raises(asyncio.CancelledError):
        await getting
    waiter.put(response(2))
    assert [await waiter.get(), await waiter.get()] == [response(1), response(2)]


async def test_a_wait_with_nothing_to_come_times_out() -> None:
    waiter = _Waiter()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await waiter.get()
    waiter.put(response(3))
    assert await waiter.get() == response(3)
