"""Supervision: a processor that fails at run time is restarted; one that cannot be created
or whose settings are wrong stops everything at once, naming itself (before, the demo sat
silent for minutes while a processor that could not be built was retried)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from react_mem.bus.in_process import InProcessTransport
from react_mem.errors import ConfigurationError
from react_mem.processor import runtime
from react_mem.processor.base import Processor
from react_mem.processor.kinds import MemoryKinds
from react_mem.processor.runtime import ProcessorEntry, supervise
from react_mem.processor.settings import ProcessorSettings

#: A bound on a hang, not a timing check: a fatal error is raised long before it.
HANG = 30.0


class Unbuildable(Processor):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AttributeError("no attribute '_clients'")


class Misconfigured(Processor):
    async def start(self) -> None:
        raise ConfigurationError("setting 'model_path': /nowhere is not a file")


class FailsOnce(Processor):
    starts = 0

    async def start(self) -> None:
        type(self).starts += 1
        if type(self).starts == 1:
            raise RuntimeError("a passing fault")

    async def run(self) -> None:
        await asyncio.Event().wait()


def entry(cls: type[Processor]) -> ProcessorEntry:
    settings = ProcessorSettings.load({"id": cls.__name__.lower()})
    return ProcessorEntry(cls, settings, MemoryKinds())  # they need no memory kinds


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Unbuildable, "unbuildable cannot be created: AttributeError"),
        (Misconfigured, "model_path"),
    ],
)
async def test_a_fatal_processor_stops_everything_at_once(
    cls: type[Processor], message: str
) -> None:
    stopping = asyncio.Event()
    with pytest.raises(ConfigurationError, match=message):
        await asyncio.wait_for(supervise(entry(cls), InProcessTransport(), stopping), HANG)
    assert stopping.is_set()


async def test_a_passing_fault_is_restarted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("react_mem.processor.runtime.RESTART_DELAY", 0.01)
    stopping = asyncio.Event()
    started: list[str] = []
    task = asyncio.create_task(
        supervise(entry(FailsOnce), InProcessTransport(), stopping, lambda i, _: started.append(i))
    )
    for _ in range(int(HANG / 0.01)):
        if started:
            break
        await asyncio.sleep(0.01)
    stopping.set()
    await asyncio.wait_for(task, HANG)
    assert FailsOnce.starts == 2 and started == ["failsonce"]


def test_the_heap_is_frozen_once_every_processor_has_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen: list[int] = []
    monkeypatch.setattr(runtime.gc, "freeze", lambda: frozen.append(1))
    seen: list[str] = []
    on_started = runtime.freezing_heap(["agent", "facts"], lambda i, _s: seen.append(i))
    on_started("agent", 0.1)
    assert frozen == []  # one processor still starting: its objects would stay walked
    on_started("agent", 0.1)  # a restart does not count twice
    assert frozen == []
    on_started("facts", 0.2)
    assert frozen == [1]
    on_started("facts", 0.2)  # restarted later: frozen once only
    assert frozen == [1]
    assert seen == ["agent", "agent", "facts", "facts"]  # the caller's callback still runs
