"""Threads of work off an answer's path (react_mem.embedding.priority) run below the rest."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from react_mem.embedding.priority import NICE, is_lowered, lower_this_thread, lowered

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread priorities")


def _in_a_thread(body: object) -> list[object]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(body()))  # type: ignore[operator]
    thread.start()
    thread.join()
    return out


def test_a_lowered_thread_is_niced_and_the_others_are_not() -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def lowered() -> int:
        lower_this_thread()
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert _in_a_thread(lowered) == [min(base + NICE, 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base


def test_a_lowered_thread_leaves_a_real_time_policy() -> None:
    """Niceness means nothing to a thread at real-time priority (a process started under
    ``chrt``): a lowered thread takes the normal policy."""

    def lowered() -> tuple[int, int] | None:
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))  # this thread alone
        except PermissionError:
            return None
        lower_this_thread()
        return os.sched_getscheduler(0), os.sched_getscheduler(os.getpid())

    [got] = _in_a_thread(lowered)
    if got is None:
        pytest.skip("setting a real-time policy needs the privilege")
    assert got == (os.SCHED_OTHER, os.sched_getscheduler(os.getpid()))


def test_lowered_holds_within_its_block_and_the_tasks_started_there() -> None:
    async def read() -> bool:
        await asyncio.sleep(0)  # runs after the block has ended
        return is_lowered()

    async def main() -> list[bool]:
        seen = [is_lowered()]
        with lowered():
            seen.append(is_lowered())
            task = asyncio.ensure_future(read())
        seen.append(is_lowered())
        later = asyncio.ensure_future(read())
        return [*seen, await task, await later]

    assert asyncio.run(main()) == [False, True, False, True, False]
