"""Pulsar as the bus: its settings keys and flags (TrustGraph's), and how a process reaches
it: the broker at ``pulsar_host``, else the embedded one under the state directory."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from pydantic import AliasChoices, BaseModel, Field

from react_mem.bus.embedded import EmbeddedBroker, keep_embedded, running_broker_url
from react_mem.bus.embedded_disk import BrokerDisk, GuardedTransport
from react_mem.bus.health import BusHealth, watch_address
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.transport import BrokerNotRunning, Transport
from react_mem.disk import MIB, DiskNeed

if TYPE_CHECKING:
    from react_mem.processor.settings import BusSettings


class PulsarSettings(BaseModel):
    """Pulsar's keys in the bus settings. No ``pulsar_host``: the embedded broker."""

    pulsar_host: str | None = Field(
        default=None, validation_alias=AliasChoices("pulsar_host", "PULSAR_HOST")
    )
    pulsar_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("pulsar_api_key", "PULSAR_API_KEY")
    )
    pulsar_listener: str | None = Field(
        default=None, validation_alias=AliasChoices("pulsar_listener", "PULSAR_LISTENER")
    )
    #: TLS to the broker (a ``pulsar+ssl://`` host): see :class:`PulsarOptions`.
    pulsar_tls_trust_certs_file: str | None = Field(
        default=None,
        validation_alias=AliasChoices("pulsar_tls_trust_certs_file", "PULSAR_TLS_TRUST_CERTS_FILE"),
    )
    pulsar_tls_validate_hostname: bool = Field(
        default=True,
        validation_alias=AliasChoices(
            "pulsar_tls_validate_hostname", "PULSAR_TLS_VALIDATE_HOSTNAME"
        ),
    )
    pulsar_tls_cert_file: str | None = Field(
        default=None, validation_alias=AliasChoices("pulsar_tls_cert_file", "PULSAR_TLS_CERT_FILE")
    )
    pulsar_tls_key_file: str | None = Field(
        default=None, validation_alias=AliasChoices("pulsar_tls_key_file", "PULSAR_TLS_KEY_FILE")
    )
    #: The embedded broker takes no persistent publish while its disk has less free than
    #: this (see :mod:`react_mem.bus.embedded_disk`); 0: never checked.
    broker_min_free_disk_mib: int = Field(default=64, ge=0)


def add_args(parser: argparse.ArgumentParser) -> None:
    """Pulsar's flags; absent ones stay unset so environment and settings file apply."""
    parser.add_argument(
        "-p",
        "--pulsar-host",
        default=argparse.SUPPRESS,
        help="Pulsar URL (env PULSAR_HOST); default: the embedded broker",
    )
    parser.add_argument(
        "--pulsar-api-key", default=argparse.SUPPRESS, help="Pulsar token (env PULSAR_API_KEY)"
    )
    parser.add_argument("--pulsar-listener", default=argparse.SUPPRESS, help="Pulsar listener name")
    tls = {
        "--pulsar-tls-trust-certs-file": "CA bundle for a pulsar+ssl:// broker",
        "--pulsar-tls-cert-file": "client certificate (mutual TLS authentication)",
        "--pulsar-tls-key-file": "client private key (mutual TLS authentication)",
    }
    for flag, text in tls.items():
        env = flag.removeprefix("--").replace("-", "_").upper()
        parser.add_argument(flag, default=argparse.SUPPRESS, help=f"{text} (env {env})")
    parser.add_argument(
        "--pulsar-tls-validate-hostname",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS,
        help="check the broker's host name against its certificate (default: on)",
    )


def describe(settings: BusSettings) -> str:
    return settings.pulsar_host or f"embedded broker ({settings.state_dir / 'broker'})"


def broker_address(url: str) -> tuple[str, int]:
    """``pulsar://host:port`` (or ``pulsar+ssl://``, or a list of hosts) -> its first host."""
    scheme, _, rest = url.partition("://")
    host, _, port = rest.split(",")[0].split("/")[0].rpartition(":")
    default = 6651 if scheme.endswith("ssl") else 6650
    return (host, int(port)) if host and port.isdigit() else (rest.split(",")[0], default)


def disk_needs(settings: BusSettings) -> list[DiskNeed]:
    """The embedded broker's data and floor, where this process would start it."""
    data_dir = settings.state_dir / "broker"
    if settings.pulsar_host is not None or running_broker_url(data_dir) is not None:
        return []
    floor = settings.broker_min_free_disk_mib * MIB
    return [DiskNeed("the embedded broker", data_dir, MIB, floor, "broker_min_free_disk_mib")]


@contextlib.asynccontextmanager
async def connect(
    settings: BusSettings, *, start_embedded: bool, health: BusHealth | None = None
) -> AsyncIterator[Transport]:
    """Connect to ``pulsar_host``, or to the embedded broker: the one running under the
    state directory, else (if ``start_embedded``) a new one owned by this process. With
    ``health``, the broker is watched meanwhile (ours kept alive, another one probed)."""
    broker: EmbeddedBroker | None = None
    disk: BrokerDisk | None = None
    url = settings.pulsar_host
    if url is None:
        data_dir = settings.state_dir / "broker"
        disk = BrokerDisk(data_dir, settings.broker_min_free_disk_mib)
        url = running_broker_url(data_dir)
        if url is None and not start_embedded:
            raise BrokerNotRunning(
                f"no broker is running under {settings.state_dir}: start the stack "
                "with `react-mem up`, or give --pulsar-host"
            )
        if url is None:
            broker = EmbeddedBroker(data_dir)
            url = await asyncio.to_thread(broker.start)
            disk.clear()  # a new broker reads its log back whole
    pulsar = PulsarTransport(
        PulsarOptions(
            url=url,
            api_key=settings.pulsar_api_key,
            listener=settings.pulsar_listener,
            tls_trust_certs_file=settings.pulsar_tls_trust_certs_file,
            tls_validate_hostname=settings.pulsar_tls_validate_hostname,
            tls_cert_file=settings.pulsar_tls_cert_file,
            tls_key_file=settings.pulsar_tls_key_file,
            connect_timeout=settings.connect_timeout,
        )
    )
    transport: Transport = pulsar if disk is None else GuardedTransport(pulsar, disk)
    await transport.connect()
    watcher = None
    if health is not None:
        watcher = asyncio.create_task(
            keep_embedded(broker, health, disk=disk)
            if broker is not None
            else watch_address(*broker_address(url), health)
        )
    try:
        yield transport
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await transport.close()
        if broker is not None:
            await asyncio.to_thread(broker.stop)
