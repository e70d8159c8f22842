"""Whether this process's broker is reachable, and what to do when it is not.

A backend's ``connect`` runs one watcher beside the transport: the embedded broker's
process is kept alive (restarted on its own address and data when it dies, so clients
reconnect by themselves; given up after too many deaths in a short time), and any other
broker's address is probed. The state feeds the ``react_mem_bus_up`` gauge and the
``/healthz`` endpoint (503 while the bus is down); a broker given up on sets ``lost``,
which stops the process with an error, so its own supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry, Gauge

from react_mem.errors import BusError
from react_mem.metrics import per_registry

logger = logging.getLogger(__name__)

#: How often the embedded broker's process is looked at (a cheap poll).
CHECK_INTERVAL = 0.5
#: How often another broker's address is probed (a TCP connection each time).
ADDRESS_INTERVAL = 5.0

_gauge = per_registry(
    lambda registry: Gauge(
        "react_mem_bus_up",
        "1 while this process's message broker is reachable, else 0",
        registry=registry,
    )
)


class BusHealth:
    """The bus's state as this process sees it. ``reason`` is None while it is up."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.reason: str | None = "not connected yet"
        self.error: BusError | None = None
        self.lost = asyncio.Event()
        self._gauge = _gauge(registry)
        self._gauge.set(0)

    @property
    def up(self) -> bool:
        return self.reason is None

    def mark_up(self) -> None:
        if self.reason is not None:
            logger.info("bus is up again" if self.reason != "not connected yet" else "bus is up")
        self.reason = None
        self._gauge.set(1)

    def mark_down(self, reason: str) -> None:
        if self.reason is None:
            logger.error("bus is down: %s", reason)
        self.reason = reason
        self._gauge.set(0)

    def give_up(self, error: BusError) -> None:
        self.mark_down(str(error))
        self.error = error
        self.lost.set()


#: The health the process's ``/healthz`` reports: the one its running ``serve`` published.
_current: BusHealth | None = None


def publish(health: BusHealth | None) -> None:
    global _current  # one health endpoint per process, like its metrics
    _current = health


def current_reason() -> str | None:
    """Why ``/healthz`` is failing (None: healthy). No bus opened yet counts as down."""
    return "no bus opened" if _current is None else _current.reason


async def watch_address(host: str, port: int, health: BusHealth) -> None:
    """Probe ``host:port`` until cancelled: the bus is up while it accepts connections."""
    while True:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
            writer.close()
            health.mark_up()
        except (OSError, TimeoutError) as exc:
            health.mark_down(f"broker at {host}:{port} unreachable: {exc or type(exc).__name__}")
        await asyncio.sleep(ADDRESS_INTERVAL)


def health_interval() -> float:
    return CHECK_INTERVAL
