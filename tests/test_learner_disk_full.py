"""The learner on a full disk (issue 26, finding 2): a trajectory it cannot write, to its
ledger or through a memory service, is kept on the bus and redelivered however long the
disk stays full (before, it was dead-lettered after ``max_redeliveries``: an answered
"remember that" never learned), the wait is logged and counted, and it is learned once as
soon as space returns.

Real broker (both where installed), real memory services and ledger, a scripted LLM; the
disk is a small tmpfs mounted for the test (needs root; skipped where not allowed).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from react_mem.errors import ConfigurationError
from tests.test_disk_full import fill, small_disk
from tests.test_learner import Stack, stack, trajectory

pytestmark = pytest.mark.broker
__all__ = ["stack"]  # the fixture, used by name

#: Far below what the deferrals below take: the old rule would have dead-lettered it.
MAX_REDELIVERIES = 1
DEFERRALS = 4


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB disk, unmounted after the stack (asked for first) has stopped."""
    with small_disk(tmp_path / "disk", 32) as mounted:
        yield mounted


@pytest.fixture
def fact_disk(tmp_path: Path) -> Iterator[Path]:
    """fact-memory's data directory on a 96 MiB disk (its first files take 40-45 MiB)."""
    with small_disk(tmp_path / "fact-memory", 96) as mounted:
        yield mounted


def dead_letters(stack: Stack) -> float:
    consumer = stack.learner_topics["trajectory"]
    return sum(
        stack.sample("tg_consumer_dead_letter_total", consumer=consumer, reason=reason)
        for reason in ("exhausted", "invalid", "unsettled")
    )


async def test_a_trajectory_the_ledger_has_no_room_for_waits_on_the_bus_until_space_returns(
    disk: Path, stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    await stack.start_service("fact-memory")
    await stack.start_learner(
        state_dir=disk, min_free_disk_mib=16, max_redeliveries=MAX_REDELIVERIES
    )
    filler = fill(disk, leave_mib=8)
    t = trajectory()
    await stack.append_turn(t)
    with caplog.at_level(logging.WARNING):
        await stack.publish(t, "trajectory")
        await stack.settled("trajectory", DEFERRALS, status="disk-full")
        waited = [r.getMessage() for r in caplog.records]
        assert await stack.facts() == []  # nothing learned, nothing acknowledged
        assert stack.llm.requests == []  # and no LLM call spent on it meanwhile
        filler.unlink()
        await stack.settled("trajectory")
        resumed = [r.getMessage() for r in caplog.records]
    assert sorted(f.content for f in await stack.facts()) == [
        "Maria lives in the Alfama district of Lisbon.",
        "Maria, the user's sister, lives in Lisbon.",
    ]
    assert dead_letters(stack) == 0
    [first] = [m for m in waited if "min_free_disk_mib" in m]  # said once, not per attempt
    assert "ledger" in first and str(disk) in first and "kept" in first
    assert any("writing again after" in m for m in resumed)


async def test_a_memory_service_out_of_disk_delays_only_its_own_step(
    fact_disk: Path, stack: Stack
) -> None:
    await stack.start_service("fact-memory", min_free_disk_mib=16)
    await stack.start_learner(max_redeliveries=MAX_REDELIVERIES)
    filler = fill(fact_disk, leave_mib=8)
    t = trajectory()
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory", DEFERRALS, status="disk-full")
    assert await stack.facts() == []
    assert len(await stack.episodes()) == 1  # the other steps landed meanwhile
    planned = len(stack.llm.requests)
    filler.unlink()
    await stack.settled("trajectory")
    facts = await stack.facts()
    assert len(facts) == 2 and len({f.content for f in facts}) == 2  # once each
    assert len(await stack.episodes()) == 1
    assert len(stack.llm.requests) == planned  # the saved plan was reused, not asked again
    assert dead_letters(stack) == 0
    refusals = stack.service_registries["fact-memory"].get_sample_value(
        "tg_memory_disk_full_refusals_total", {"processor": f"fact-memory-{stack.unique}"}
    )
    assert refusals is not None and refusals >= DEFERRALS


async def test_a_ledger_write_sqlite_finds_no_room_for_is_kept_too(
    disk: Path, stack: Stack
) -> None:
    """No floor (0): SQLite's own "database or disk is full" is the same DiskFull."""
    await stack.start_service("fact-memory")
    await stack.start_learner(
        state_dir=disk, min_free_disk_mib=0, max_redeliveries=MAX_REDELIVERIES
    )
    filler = fill(disk, leave_mib=0)
    t = trajectory()
    await stack.append_turn(t)
    await stack.publish(t, "trajectory")
    await stack.settled("trajectory", DEFERRALS, status="disk-full")
    filler.unlink()
    await stack.settled("trajectory")
    assert len(await stack.facts()) == 2
    assert dead_letters(stack) == 0


async def test_a_learner_started_on_a_full_disk_stops_with_the_reason(
    disk: Path, stack: Stack
) -> None:
    fill(disk, leave_mib=4)
    with pytest.raises(ConfigurationError, match="min_free_disk_mib"):
        await stack.start_learner(state_dir=disk, min_free_disk_mib=8)
