"""A flow's after-reply work: bounded in number and time, ended with its flow, drops counted."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from react_mem.metrics import BackgroundMetrics, families
from react_mem.processor.background import Background, BackgroundLimits


def background(limits: BackgroundLimits) -> tuple[Background, CollectorRegistry]:
    registry = CollectorRegistry()
    return Background("p ws/f", BackgroundMetrics(families(registry), "p"), limits), registry


def dropped(registry: CollectorRegistry, reason: str) -> float:
    value = registry.get_sample_value(
        "react_mem_background_dropped_total",
        {"processor": "p", "work": "provenance", "reason": reason},
    )
    return value or 0.0


async def test_work_past_the_limit_is_dropped_at_once_and_counted() -> None:
    work, registry = background(BackgroundLimits(pending=2, deadline=60, grace=0))
    release = asyncio.Event()
    assert work.submit("provenance", release.wait)
    assert work.submit("provenance", release.wait)
    assert not work.submit("provenance", release.wait)
    assert dropped(registry, "full") == 1
    release.set()
    await work.close()
    assert work.pending == 0


async def test_work_past_its_deadline_is_dropped() -> None:
    work, registry = background(BackgroundLimits(deadline=0.05))
    assert work.submit("provenance", asyncio.Event().wait)
    await work.close()  # waits out the deadline, which ends the work first
    assert dropped(registry, "deadline") == 1


async def test_a_stopping_flow_finishes_what_it_can_and_drops_the_rest() -> None:
    work, registry = background(BackgroundLimits(deadline=60, grace=0.05))
    finished: list[str] = []

    async def quick() -> None:
        finished.append("quick")

    assert work.submit("provenance", quick)
    assert work.submit("provenance", asyncio.Event().wait)  # a librarian that never answers
    await work.close()
    assert finished == ["quick"]
    assert work.pending == 0 and dropped(registry, "stopped") == 1
    assert not work.submit("provenance", quick)  # nothing new after the flow stopped
    assert dropped(registry, "stopped") == 2


async def test_failing_work_is_counted_not_raised() -> None:
    work, registry = background(BackgroundLimits())

    async def failing() -> None:
        raise RuntimeError("librarian down")

    assert work.submit("provenance", failing)
    await work.close()
    assert dropped(registry, "failed") == 1
