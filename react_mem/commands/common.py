"""What the client commands share: the stack's queue names, reaching its bus, options."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TextIO, TypeAlias

from react_mem.bus.backends import open_bus
from react_mem.bus.transport import BrokerNotRunning, Transport
from react_mem.processor.settings import BusSettings

# A string: the class is not subscriptable at run time.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

#: Adds the bus flags (``-p``, ``--state-dir``, ``--settings`` ...) to a parser.
BusArgs = Callable[[argparse.ArgumentParser], None]

NO_STACK_HINT = "is `react-mem up` running?"


def queue(
    cls: Literal["request", "response", "flow"], topic: str, workspace: str, flow: str
) -> str:
    """TrustGraph's queue naming: ``<class>:tg:<topic>:<workspace>:<flow>``."""
    return f"{cls}:tg:{topic}:{workspace}:{flow}"


@dataclass(frozen=True, slots=True)
class ServiceQueues:
    """A flow service's request and response queues."""

    request: str
    response: str

    @classmethod
    def of(cls, service: str, workspace: str, flow: str) -> ServiceQueues:
        return cls(
            queue("request", service, workspace, flow), queue("response", service, workspace, flow)
        )


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
    async with contextlib.AsyncExitStack() as stack:
        try:
            transport = await stack.enter_async_context(open_bus(settings, start_embedded=False))
        except BrokerNotRunning as exc:
            print(f"react-mem: {exc}", file=err)
            return 1
        return await action(transport)


def one_line(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"
