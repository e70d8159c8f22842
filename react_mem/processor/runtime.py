"""Running processors: the bus (any backend), metrics endpoint, supervision, signals."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import importlib
import logging
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from react_mem.bus import health as bus_health
from react_mem.bus.backends import bus_disk_needs, open_bus
from react_mem.bus.transport import Transport
from react_mem.disk import preflight
from react_mem.errors import ConfigurationError
from react_mem.ownership import DirectoryInUse
from react_mem.processor.base import Processor
from react_mem.processor.endpoint import serve_http
from react_mem.processor.kinds import MemoryKinds
from react_mem.processor.settings import BusSettings, ProcessorSettings

logger = logging.getLogger(__name__)

RESTART_DELAY = 4.0

#: The entry-point group naming the processors an installed package provides
#: (``name = "module:Class"`` in its ``pyproject.toml``); react-mem's own are declared there too.
ENTRY_POINT_GROUP = "react_mem.processors"


def registered_processors(kinds: MemoryKinds | None = None) -> dict[str, Callable[[], Any]]:
    """Short name -> its class's loader, for every processor the installed packages register
    and every memory kind's (:class:`~react_mem.processor.kinds.MemoryKind`; ``kinds``: those
    read at start-up, by default the installed ones, read now)."""
    if kinds is None:
        kinds = MemoryKinds.from_entry_points()
    found: dict[str, Callable[[], Any]] = {
        ep.name: ep.load for ep in entry_points(group=ENTRY_POINT_GROUP)
    }
    for kind in kinds:
        found[kind.name] = kind.processor
    return found


def resolve_processor(name: str, kinds: MemoryKinds | None = None) -> type[Processor]:
    """A registered short name (``fact-memory``) or any ``module.Class`` path."""
    registered = registered_processors(kinds)
    try:
        if name in registered:
            cls = registered[name]()
        else:
            module_name, _, class_name = name.rpartition(".")
            if not module_name:
                raise ConfigurationError(
                    f"unknown processor {name!r}: use one of {', '.join(sorted(registered))}"
                    " or module.Class"
                )
            cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load processor {name!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Processor)):
        raise ConfigurationError(f"{name!r} is not a react-mem Processor")
    return cls


@dataclass(frozen=True)
class ProcessorEntry:
    cls: type[Processor]
    settings: ProcessorSettings
    #: The memory kinds read at start-up, for a processor that needs them (the agent).
    kinds: MemoryKinds


async def supervise(
    entry: ProcessorEntry,
    transport: Transport,
    stopping: asyncio.Event,
    started: Callable[[str, float], Any] | None = None,
) -> None:
    """Run one processor, restarting it after a failure, until ``stopping`` is set;
    ``started(id, seconds)`` is called each time it has started. A processor that cannot
    be created, or whose start reports a configuration error, stops everything at once."""
    while not stopping.is_set():
        try:
            processor = entry.cls.create(entry.settings, transport, entry.kinds)
        except Exception as exc:
            stopping.set()  # a processor that cannot be built will not be by restarting
            raise ConfigurationError(f"{entry.settings.id} cannot be created: {exc!r}") from exc
        try:
            began = time.monotonic()
            await processor.start()
            if started is not None:
                started(entry.settings.id, time.monotonic() - began)
            runner = asyncio.create_task(processor.run())
            stopper = asyncio.create_task(stopping.wait())
            done, _ = await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if runner in done:
                runner.result()
        except (DirectoryInUse, ConfigurationError):
            stopping.set()  # its data is owned elsewhere, or its settings are wrong: fatal
            raise
        except Exception:
            logger.exception("%s failed; restarting in %ss", entry.settings.id, RESTART_DELAY)
        finally:
            await processor.stop()
        if not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), RESTART_DELAY)


def freezing_heap(
    ids: list[str], started: Callable[[str, float], Any] | None
) -> Callable[[str, float], Any]:
    """``started``, and once every one of ``ids`` has started: the heap collected and frozen.

    A full GC pass walks every tracked object: in a service with the embedding model
    imported (~470k objects) it holds the loop 100-220 ms, every minute or two under load.
    Frozen, the objects made while starting (modules, models, settings) are no longer
    walked, so a pass walks only what serving makes (``loop_stall.py --mode frozen``). A
    cycle among them that later becomes garbage is not collected: one startup's worth."""
    waiting = set(ids)

    def on_started(processor: str, seconds: float) -> None:
        if started is not None:
            started(processor, seconds)
        if processor in waiting:
            waiting.discard(processor)
            if not waiting:
                gc.collect()
                gc.freeze()
                logger.info("heap frozen after start: %d objects", gc.get_freeze_count())

    return on_started


def one_malloc_arena() -> bool:
    """Have every thread this process starts from now on allocate from glibc's main arena;
    whether the C library could be told (glibc only; elsewhere nothing is done).

    By default each thread that allocates gets an arena of its own (up to 8 a core), whose
    free top ``malloc_trim`` does not give back, and glibc lets a top keep twice the largest
    block it has mapped and freed (up to 64 MiB). The embedder's lanes allocate tensors of
    several MiB (a 256-token text's attention scores are 3 MiB) from their own threads, so
    their arenas kept 40-60 MiB resident that the memory services' trims
    (:mod:`memory_services.heap`) could not reach; in the main arena a trim returns it
    (``benchmarks/onnx_heap.py``: after texts of many lengths on three lanes, 2-4 MiB
    resident instead of 40-70, the same CPU per text). Called before the threads start:
    one that already has an arena keeps it."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, 1))


#: glibc's ``mallopt`` parameter for the number of arenas.
_M_ARENA_MAX = -8


async def serve(
    entries: list[ProcessorEntry],
    bus: BusSettings,
    *,
    stopping: asyncio.Event | None = None,
    ready: Callable[[Transport], Any] | None = None,
    started: Callable[[str, float], Any] | None = None,
) -> None:
    """Run ``entries`` in this process on one bus connection until SIGINT/SIGTERM.

    ``ready(transport)`` is awaited once the bus is open (processors start meanwhile);
    ``started(id, seconds)`` is called as each processor finishes starting. A broker lost
    for good (the embedded one dying over and over) stops everything with a BusError."""
    one_malloc_arena()  # before the bus's and the processors' threads start
    ids = [e.settings.id for e in entries]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise ConfigurationError(f"duplicate processor id(s) in group: {sorted(duplicates)}")
    # Room on the disk for everything this process is about to write, before any of it
    # starts: parts of one process start at once, each seeing the same free space.
    preflight([*bus_disk_needs(bus), *(n for e in entries for n in e.cls.disk_needs(e.settings))])
    stopping = stopping or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stopping.set)
    if bus.metrics:
        start_metrics(bus.metrics_port)
    health = bus_health.BusHealth()
    bus_health.publish(health)
    async with open_bus(bus, health=health) as transport:
        on_started = freezing_heap(ids, started)
        tasks = [
            asyncio.create_task(supervise(e, transport, stopping, on_started)) for e in entries
        ]
        waiter = asyncio.create_task(_until_ready(ready, transport, stopping))
        try:
            await _first(stopping, health.lost)
            if health.error is not None:
                tasks.append(asyncio.create_task(_raise(health.error)))
        finally:
            stopping.set()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            if not waiter.done():
                waiter.cancel()
            results.append(*await asyncio.gather(waiter, return_exceptions=True))
        for result in results:  # a processor's fatal error first, then ready's
            if isinstance(result, Exception):
                raise result


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def _raise(error: Exception) -> None:
    raise error


async def _until_ready(
    ready: Callable[[Transport], Any] | None, transport: Transport, stopping: asyncio.Event
) -> None:
    """Await ``ready``; its failure stops everything (a processor's fatal error, which
    stops everything too, cancels it)."""
    if ready is None:
        return
    try:
        await ready(transport)
    except BaseException:
        stopping.set()
        raise


def start_metrics(port: int) -> None:
    """Serve Prometheus metrics (and ``/healthz``) on ``port``; a port in use is refused
    with the setting named."""
    try:
        serve_http(port, bus_health.current_reason)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot serve metrics on port {port}: {exc.strerror or exc}; choose another port "
            "with -P/--metrics-port (env REACT_MEM_METRICS_PORT), or turn metrics off with "
            "--no-metrics"
        ) from None
    logger.info("metrics on :%d/metrics", port)


def port_free(port: int) -> bool:
    """Whether the metrics server could bind ``port`` now (as it binds: all addresses)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])
