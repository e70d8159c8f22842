"""One ``react-mem memory`` subcommand: which service's client, which of its operations
with what arguments, and how to show the result."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TextIO, TypeVar

from react_mem.clients.base import ServiceClient
from react_mem.commands.common import BusArgs, Subparsers, flow_args
from react_mem.schema.scope import Scope

C = TypeVar("C", bound=ServiceClient[Any, Any])
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class Operation(Generic[C, R]):
    client: type[C]
    #: The operation: the client's method called with the scope and the arguments.
    call: Callable[[C, Scope, argparse.Namespace], Awaitable[R]]
    #: Writes the result to ``out``; returns a message for stderr when it is a failure.
    render: Callable[[R, argparse.Namespace, TextIO], str | None]
    #: The result as the service's reply fields, for ``--json``.
    wire: Callable[[R], dict[str, Any]]
    #: For destructive operations: describes what will be deleted, to confirm first.
    confirm: Callable[[argparse.Namespace], str] | None = None

    @property
    def service(self) -> str:
        """The service name in its queues (``request:tg:{service}:{workspace}:{flow}``)."""
        return self.client.service.name


def leaf(
    sub: Subparsers, name: str, help: str, operation: Operation[Any, Any], bus: BusArgs
) -> argparse.ArgumentParser:
    """A subcommand parser with the scope, output and bus options every operation takes."""
    parser = sub.add_parser(name, help=help, description=help)
    parser.add_argument("--collection", default="default", help="collection (default: default)")
    parser.add_argument(
        "-u", "--user", help="whose memories (default: no user, the collection's shared memories)"
    )
    flow_args(parser)
    parser.add_argument("--json", action="store_true", help="print the service's JSON response")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the service (30)"
    )
    if operation.confirm is not None:
        parser.add_argument("-y", "--yes", action="store_true", help="do not ask to confirm")
    bus(parser)
    parser.set_defaults(operation=operation, log_level="WARNING")
    return parser


def owner(args: argparse.Namespace) -> Scope:
    """The scope the arguments name (``--conversation`` where the command has one)."""
    return Scope(args.workspace, args.collection, args.user, getattr(args, "conversation", None))


def scope(args: argparse.Namespace) -> str:
    """The scope in words, for messages."""
    user = f", user {args.user}" if args.user else ""
    return f"collection {args.collection}{user}"
