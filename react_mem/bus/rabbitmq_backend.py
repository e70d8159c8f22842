"""RabbitMQ as the bus: TrustGraph's keys, flags and environment (``--rabbitmq-host`` /
``RABBITMQ_HOST``, ...) and how a process reaches it. There is no embedded RabbitMQ: the
broker must be running."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from pydantic import AliasChoices, BaseModel, Field

from react_mem.bus.health import BusHealth, watch_address
from react_mem.bus.rabbitmq import RabbitMQOptions, RabbitMQTransport
from react_mem.bus.transport import BrokerNotRunning, Transport
from react_mem.errors import BusError

if TYPE_CHECKING:
    from react_mem.processor.settings import BusSettings

#: Unsettled messages per consumer when the process runs a group (no single concurrency).
GROUP_PREFETCH = 32


class RabbitMQSettings(BaseModel):
    """RabbitMQ's keys in the bus settings, with TrustGraph's defaults."""

    rabbitmq_host: str = Field(
        default="rabbitmq", validation_alias=AliasChoices("rabbitmq_host", "RABBITMQ_HOST")
    )
    rabbitmq_port: int = Field(
        default=5672,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("rabbitmq_port", "RABBITMQ_PORT"),
    )
    rabbitmq_username: str = Field(
        default="guest",
        validation_alias=AliasChoices("rabbitmq_username", "RABBITMQ_USERNAME"),
    )
    rabbitmq_password: str = Field(
        default="guest",
        validation_alias=AliasChoices("rabbitmq_password", "RABBITMQ_PASSWORD"),
    )
    rabbitmq_vhost: str = Field(
        default="/", validation_alias=AliasChoices("rabbitmq_vhost", "RABBITMQ_VHOST")
    )


def add_args(parser: argparse.ArgumentParser) -> None:
    """RabbitMQ's flags; absent ones stay unset so environment and settings file apply."""
    flags = {
        "--rabbitmq-host": "RabbitMQ host (env RABBITMQ_HOST; default: rabbitmq)",
        "--rabbitmq-port": "RabbitMQ AMQP port (env RABBITMQ_PORT; default: 5672)",
        "--rabbitmq-username": "RabbitMQ user (env RABBITMQ_USERNAME; default: guest)",
        "--rabbitmq-password": "RabbitMQ password (env RABBITMQ_PASSWORD; default: guest)",
        "--rabbitmq-vhost": "RabbitMQ virtual host (env RABBITMQ_VHOST; default: /)",
    }
    for flag, text in flags.items():
        parser.add_argument(flag, default=argparse.SUPPRESS, help=text)


def options(settings: BusSettings) -> RabbitMQOptions:
    concurrency = getattr(settings, "concurrency", None)
    return RabbitMQOptions(
        host=settings.rabbitmq_host,
        port=settings.rabbitmq_port,
        username=settings.rabbitmq_username,
        password=settings.rabbitmq_password,
        vhost=settings.rabbitmq_vhost,
        connect_timeout=settings.connect_timeout,
        prefetch=concurrency if isinstance(concurrency, int) else GROUP_PREFETCH,
    )


def describe(settings: BusSettings) -> str:
    return f"RabbitMQ at {options(settings).describe()}"


@contextlib.asynccontextmanager
async def connect(
    settings: BusSettings, *, start_embedded: bool, health: BusHealth | None = None
) -> AsyncIterator[Transport]:
    """Connect to the RabbitMQ broker (a processor keeps trying for ``connect_timeout``; a
    client, ``start_embedded=False``, fails at once with what to do)."""
    opts = options(settings)
    if not start_embedded:
        opts = dataclasses.replace(opts, connect_timeout=0.0)
    transport = RabbitMQTransport(opts)
    try:
        await transport.connect()
    except BusError as exc:
        if start_embedded:
            raise
        raise BrokerNotRunning(
            f"no RabbitMQ broker at {opts.describe()}: start it, or give --rabbitmq-host ({exc})"
        ) from exc
    watcher = None
    if health is not None:  # a broker we do not own: its address is probed
        watcher = asyncio.create_task(watch_address(opts.host, opts.port, health))
    try:
        yield transport
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await transport.close()
