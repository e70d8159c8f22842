"""What the client commands share: the stack's queue names, reaching its bus, options."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TextIO, TypeAlias

from react_mem.bus.embedded import running_broker_url
from react_mem.bus.transport import Transport
from react_mem.processor.runtime import open_bus
from react_mem.processor.settings import BusSettings

# A string: the class is not subscriptable at run time.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

#: Adds the bus flags (``-p``, ``--state-dir``, ``--settings`` ...) to a parser.
BusArgs = Callable[[argparse.ArgumentParser], None]

NO_STACK_HINT = "is `react-mem up` running?"


@dataclass(frozen=True, slots=True)
class ServiceQueues:
    """A flow service's request and response queues."""

    request: str
    response: str

    @classmethod
    def of(cls, service: str, workspace: str, flow: str) -> ServiceQueues:
        tail = f"{service}:{workspace}:{flow}"
        return cls(f"request:tg:{tail}", f"response:tg:{tail}")


def flow_args(parser: argparse.ArgumentParser) -> None:
    """Where the service runs: the flow's workspace and name."""
    parser.add_argument("--workspace", default="default", help="workspace (default: default)")
    parser.add_argument("--flow", default="default", help="flow (default: default)")


def bus_settings(args: argparse.Namespace) -> BusSettings:
    """Bus settings from the flags given (the parser suppresses absent ones)."""
    given = {k: v for k, v in vars(args).items() if k in BusSettings.model_fields}
    return BusSettings.load(given, file=getattr(args, "settings", None))


async def with_bus(
    settings: BusSettings,
    action: Callable[[Transport], Awaitable[int]],
    *,
    err: TextIO = sys.stderr,
) -> int:
    """Run ``action`` on the bus of a running stack. Unlike processors, a client never
    starts the embedded broker: nothing would be listening on a fresh one."""
    url = settings.pulsar_host or running_broker_url(settings.state_dir / "broker")
    if url is None:
        print(
            f"react-mem: no broker is running under {settings.state_dir}: start the stack "
            "with `react-mem up`, or give --pulsar-host",
            file=err,
        )
        return 1
    async with open_bus(settings.model_copy(update={"pulsar_host": url})) as transport:
        return await action(transport)


def one_line(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"
