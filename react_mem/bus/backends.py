"""The brokers react-mem can run on, chosen by ``pubsub_backend`` (TrustGraph's
``--pubsub-backend``, env ``PUBSUB_BACKEND``).

A new broker is one module (its transport, its settings keys, flags and ``connect``) and
one registration here: an entry in :data:`BACKENDS` and its settings class among the bases
of :class:`BackendSettings`. Nothing in the processor framework names a broker.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from react_mem.bus import pulsar_backend, rabbitmq_backend
from react_mem.bus.health import BusHealth
from react_mem.bus.pulsar_backend import PulsarSettings
from react_mem.bus.rabbitmq_backend import RabbitMQSettings
from react_mem.bus.transport import Transport
from react_mem.disk import DiskNeed
from react_mem.errors import ConfigurationError

if TYPE_CHECKING:
    from react_mem.processor.settings import BusSettings


class Connect(Protocol):
    def __call__(
        self, settings: BusSettings, *, start_embedded: bool, health: BusHealth | None = None
    ) -> AbstractAsyncContextManager[Transport]: ...


@dataclass(frozen=True, slots=True)
class BusBackend:
    name: str
    #: Adds the backend's flags to a parser (absent flags stay unset).
    add_args: Callable[[argparse.ArgumentParser], None]
    #: Where the bus is, in words, for ``react-mem up``.
    describe: Callable[[BusSettings], str]
    #: Opens a connected transport; ``start_embedded=False`` (clients) raises
    #: :class:`~react_mem.bus.transport.BrokerNotRunning` instead of starting a broker;
    #: with ``health``, it watches the broker while open (see ``bus/health.py``).
    connect: Connect
    #: What the backend keeps on this machine's disk (an embedded broker's data), checked
    #: for room before a process starts (:func:`react_mem.disk.preflight`).
    disk_needs: Callable[[BusSettings], list[DiskNeed]] = lambda _: []


BACKENDS: dict[str, BusBackend] = {
    "pulsar": BusBackend(
        "pulsar",
        pulsar_backend.add_args,
        pulsar_backend.describe,
        pulsar_backend.connect,
        pulsar_backend.disk_needs,
    ),
    "rabbitmq": BusBackend(
        "rabbitmq", rabbitmq_backend.add_args, rabbitmq_backend.describe, rabbitmq_backend.connect
    ),
}


class BackendSettings(PulsarSettings, RabbitMQSettings):
    """Every backend's own keys, flat as TrustGraph's flags (``pulsar_host``, ...)."""


def backend(settings: BusSettings) -> BusBackend:
    try:
        return BACKENDS[settings.pubsub_backend]
    except KeyError:
        raise ConfigurationError(unknown_backend(settings.pubsub_backend)) from None


def unknown_backend(name: str) -> str:
    return f"unknown pubsub_backend {name!r}: use one of {', '.join(BACKENDS)}"


def add_bus_args(parser: argparse.ArgumentParser) -> None:
    """``--pubsub-backend`` and every backend's flags."""
    parser.add_argument(
        "--pubsub-backend",
        default=argparse.SUPPRESS,
        help=f"the broker: {', '.join(BACKENDS)} (env PUBSUB_BACKEND; default: pulsar)",
    )
    for each in BACKENDS.values():
        each.add_args(parser)


def bus_disk_needs(settings: BusSettings) -> list[DiskNeed]:
    return backend(settings).disk_needs(settings)


def describe_bus(settings: BusSettings) -> str:
    return backend(settings).describe(settings)


def open_bus(
    settings: BusSettings, *, start_embedded: bool = True, health: BusHealth | None = None
) -> AbstractAsyncContextManager[Transport]:
    """A connected transport to the configured broker, closed on exit. Processors may start
    the embedded broker when none is configured; clients pass ``start_embedded=False``.
    ``health`` (processes that serve): the broker is watched, and kept alive if ours."""
    return backend(settings).connect(settings, start_embedded=start_embedded, health=health)
