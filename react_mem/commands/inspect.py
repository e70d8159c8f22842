"""``react-mem inspect``: the web memory inspector against a running stack."""

from __future__ import annotations

import argparse

from react_mem.bus.transport import Transport
from react_mem.commands.common import BusArgs, Subparsers, bus_settings, with_bus
from react_mem.inspector.server import DEFAULT_HOST, DEFAULT_PORT, InspectorSettings


def add_web_args(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--port``, ``--host`` and ``--token`` (``prefix``: ``inspector-`` under ``up``)."""
    parser.add_argument(
        f"--{prefix}port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        f"--{prefix}host",
        default=DEFAULT_HOST,
        help=f"address to bind (default {DEFAULT_HOST}: this machine only)",
    )
    parser.add_argument(
        f"--{prefix}token",
        default=None,
        help="the token every request needs (env REACT_MEM_INSPECTOR_TOKEN; "
        "default: a new one, printed once)",
    )


def settings_of(args: argparse.Namespace, prefix: str = "") -> InspectorSettings:
    values, key = vars(args), prefix.replace("-", "_")
    return InspectorSettings(
        host=values[f"{key}host"], port=values[f"{key}port"], token=values[f"{key}token"]
    )


def add_parser(sub: Subparsers, bus: BusArgs) -> None:
    help = "serve the web memory inspector against a running stack"
    parser = sub.add_parser(
        "inspect",
        help=help,
        description=help + ": what the agent remembers about a user, where it learned it, "
        "what an answer's prompt held; correct it, export it, forget the user.",
    )
    add_web_args(parser)
    bus(parser)
    parser.set_defaults(log_level="INFO")


async def command(args: argparse.Namespace) -> int:
    from react_mem.inspector.server import serve_inspector

    async def run(transport: Transport) -> int:
        print("react-mem inspect: serving the memory inspector (Ctrl-C stops it)", flush=True)
        await serve_inspector(transport, settings_of(args))
        return 0

    return await with_bus(bus_settings(args), run)
