"""The stall tracer of ``benchmarks/loop_stall.py --trace`` tells a stall's causes apart:
work on the loop (named by the task that did it), a garbage-collection pass, and the
processes it watches."""

from __future__ import annotations

import ast
import asyncio
import gc
import os
import subprocess
import sys
import time

from benchmarks.stall_trace import StallTrace, descendants


def spin(seconds: float) -> None:
    """Hold the loop thread on a CPU (no sleep, no GIL release) for at least ``seconds``."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def traced(work: object) -> list[str]:
    trace = StallTrace(20.0, list)
    trace.start()
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            trace.tick(started, (time.perf_counter() - started - 0.001) * 1000)

    async def busy_writer() -> None:
        await asyncio.sleep(0.01)
        if callable(work):
            work()
        await asyncio.sleep(0.01)
        stop.set()

    try:
        await asyncio.gather(ticker(), busy_writer())
    finally:
        trace.stop()
    return list(trace.report())


def test_work_on_the_loop_is_named_by_its_task() -> None:
    lines = asyncio.run(traced(lambda: spin(0.1)))
    assert lines and lines[0].startswith("stall ")
    callbacks = [line for line in lines if "callback" in line]
    assert any("busy_writer" in line for line in callbacks), lines
    # The callback that spun held the loop for the spin's 100 ms at least, whatever the load.
    took = float(next(line for line in callbacks if "busy_writer" in line).split()[1])
    assert took >= 100, lines


def test_a_collection_pass_in_the_window_is_timed() -> None:
    heap = [[i] for i in range(300_000)]  # something for a full pass to walk

    def collect() -> None:
        spin(0.03)
        gc.collect()

    lines = asyncio.run(traced(collect))
    assert heap and lines
    first = lines[0]
    generations = ast.literal_eval(first.split("(gen ")[1].rstrip(")"))
    assert 2 in generations, lines
    assert float(first.split("; gc ")[1].split(" ms")[0]) > 0, lines


def test_descendants_are_the_processes_started_below() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert child.pid not in descendants(os.getpid())
