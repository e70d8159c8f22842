"""``react-mem memory facts|episodes|conversation ...``: inspect and edit memory over the bus."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.commands import conversations, episodes, facts, forget
from react_mem.commands.common import (
    NO_STACK_HINT,
    BusArgs,
    ServiceQueues,
    Subparsers,
    bus_settings,
    with_bus,
)
from react_mem.commands.operation import Operation, owner
from react_mem.commands.progress import StatusLine
from react_mem.errors import BadRequest, ServiceError, ServiceTimeout

KINDS = {
    "facts": (facts, "facts in fact-memory"),
    "episodes": (episodes, "past invocations in episode-memory"),
    "conversation": (conversations, "conversations in conversation-memory"),
}


def add_parser(sub: Subparsers, bus: BusArgs) -> None:
    parser = sub.add_parser("memory", help="list, search and delete memories")
    kinds = parser.add_subparsers(
        dest="kind", required=True, metavar="{facts,episodes,conversation,forget}"
    )
    for name, (module, help) in KINDS.items():
        kind = kinds.add_parser(name, help=help, description=help)
        module.add_parsers(kind.add_subparsers(dest="action", required=True), bus)
    forget.add_parser(kinds, bus)


async def command(args: argparse.Namespace) -> int:
    if args.kind == "forget":
        return await with_bus(bus_settings(args), lambda t: forget.execute(t, args))
    return await with_bus(bus_settings(args), lambda transport: execute(transport, args))


async def execute(
    transport: Transport,
    args: argparse.Namespace,
    *,
    queues: ServiceQueues | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run the memory operation ``args`` describe: 0 done, 1 failed, 2 bad arguments."""
    op: Operation[Any, Any] = args.operation
    queues = queues or ServiceQueues.of(op.service, args.workspace, args.flow)
    if op.confirm is not None and not args.yes and not _confirmed(op.confirm(args), err):
        return 1
    rpc: RequestResponseClient[Any, Any] = RequestResponseClient(
        transport,
        queues.request,
        queues.response,
        op.client.service.response_schema,
        subscriber="react-mem-memory",
    )
    progress = StatusLine(err, f"waiting for {op.service}")
    await rpc.start()
    try:
        progress.start()
        result = await op.call(op.client(rpc, timeout=args.timeout), owner(args), args)
    except ServiceTimeout:
        print(
            f"react-mem memory: no response from {op.service} on {queues.request} within "
            f"{args.timeout:g}s ({NO_STACK_HINT})",
            file=err,
        )
        return 1
    except ServiceError as exc:
        print(f"react-mem memory: {op.service} error ({exc.type}): {exc.detail}", file=err)
        return 1
    except BadRequest as exc:  # refused before anything was sent
        print(f"react-mem memory: invalid arguments: {exc}", file=err)
        return 2
    finally:
        await progress.stop()
        await rpc.close()
    if args.json:
        print(json.dumps(op.wire(result), indent=2), file=out)
        return 0
    problem = op.render(result, args, out)
    if problem is not None:
        print(f"react-mem memory: {problem}", file=err)
        return 1
    return 0


def _confirmed(what: str, err: TextIO) -> bool:
    if not sys.stdin.isatty():
        print(f"react-mem memory: this deletes {what}; add --yes to confirm", file=err)
        return False
    print(f"This deletes {what}.", file=err)
    return input("Continue? [y/N] ").strip().lower() in {"y", "yes"}
