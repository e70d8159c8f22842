"""The ``react-mem`` command: run processors, groups, the demo, and diagnostics."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from react_mem.bus.backends import add_bus_args, describe_bus, open_bus
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import BrokerNotRunning, Transport
from react_mem.commands import ask, feedback, inspect, memory_command, playbook, trajectories
from react_mem.demo import run_demo
from react_mem.errors import ReactMemError, RequestTimeout
from react_mem.ownership import DirectoryOwner
from react_mem.processor.group import load_group
from react_mem.processor.kinds import MemoryKinds
from react_mem.processor.runtime import (
    ProcessorEntry,
    free_port,
    port_free,
    resolve_processor,
    serve,
)
from react_mem.processor.settings import BusSettings
from react_mem.schema.ping import PingRequest, PingResponse
from react_mem.stack import StartupProgress, agent_queues, stack_entries, wait_until_ready

# CLI flag -> settings key; flags default to "not given" so env and file can apply.
_S = argparse.SUPPRESS


def _bus_args(parser: argparse.ArgumentParser, *, processor: bool = True) -> None:
    """The bus flags; a client command (``processor=False``) serves no metrics and logs
    warnings and worse by default."""
    add_bus_args(parser)
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=_S,
        help="where embedded data lives (env REACT_MEM_STATE_DIR)",
    )
    if processor:
        parser.add_argument(
            "--metrics",
            action=argparse.BooleanOptionalAction,
            default=_S,
            help="serve Prometheus metrics (default: on)",
        )
        parser.add_argument(
            "-P", "--metrics-port", type=int, default=_S, help="metrics port (default: 8000)"
        )
    parser.add_argument(
        "-l",
        "--log-level",
        default=_S,
        type=str.upper,
        help="DEBUG, INFO, WARNING, ERROR or CRITICAL "
        f"(default: {'INFO' if processor else 'WARNING'})",
    )
    parser.add_argument(
        "--settings",
        type=Path,
        default=None,
        help="YAML settings file (CLI flags > environment > file > defaults)",
    )


def _processor_args(parser: argparse.ArgumentParser) -> None:
    _bus_args(parser)
    parser.add_argument("--id", default=_S, help="processor id (default: its name)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=_S,
        help="messages handled at once per consumer (default: 1)",
    )
    parser.add_argument(
        "--flows",
        type=Path,
        default=_S,
        help="flow file; without it flows come from the config service",
    )
    parser.add_argument(
        "--max-redeliveries",
        type=int,
        default=_S,
        help="attempts after the first before dead-lettering (default: 5)",
    )


def _given(args: argparse.Namespace, *skip: str) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items() if k not in {"command", "settings", *skip}}


def _bus_given(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in _given(args).items() if k in BusSettings.model_fields}


def _bus_settings(args: argparse.Namespace) -> BusSettings:
    return BusSettings.load(_bus_given(args), file=args.settings)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


async def _ping(transport: Transport, queue: str, count: int, wait: float) -> list[float]:
    client: RequestResponseClient[PingRequest, PingResponse] = RequestResponseClient(
        transport,
        f"request:tg:ping:{queue}",
        f"response:tg:ping:{queue}",
        PingResponse,
        subscriber="react-mem-cli",
        timeout=1.0,
    )
    await client.start()
    try:
        deadline = time.monotonic() + wait
        while True:  # the processor may still be starting its flow
            try:
                await client.request(PingRequest(message="hello"))
                break
            except RequestTimeout:
                if time.monotonic() > deadline:
                    raise
        latencies = []
        for n in range(count):
            started = time.perf_counter()
            reply = await client.request(PingRequest(message=f"ping {n}"))
            latencies.append(time.perf_counter() - started)
            if n < 3:
                print(
                    f"  sent {f'ping {n}'!r} -> {reply.processor} answered {reply.message!r} "
                    f"on flow {reply.workspace}/{reply.flow} "
                    f"in {latencies[-1] * 1000:.2f} ms"
                )
        return latencies
    finally:
        await client.close()


def _stack(args: argparse.Namespace) -> list[ProcessorEntry]:
    llm_settings = {k: v for k, v in (("base_url", args.llm_url), ("model", args.llm_model)) if v}
    return stack_entries(
        settings_file=args.settings,
        shared=_bus_given(args),
        llm=args.llm,
        llm_settings=llm_settings,
    )


def _own_state(bus: BusSettings) -> DirectoryOwner:
    """The stack owns its state directory: a second ``up`` there is refused at once."""
    return DirectoryOwner(bus.state_dir, "the state directory").take()


async def _up(args: argparse.Namespace) -> None:
    bus = _bus_settings(args)
    owner = _own_state(bus)
    entries = _stack(args)
    request, response = agent_queues()
    print(f"react-mem up: state under {bus.state_dir}", flush=True)
    print(f"  bus          {describe_bus(bus)}")
    print(f"  agent        {request} -> {response}")
    print("  trajectories flow:tg:agent-trajectory:default:default")
    if bus.metrics:
        print(f"  metrics      http://localhost:{bus.metrics_port}/metrics")
    print("starting (models load on first start) ...", flush=True)
    progress = StartupProgress([e.settings.id for e in entries])

    web: list[asyncio.Task[None]] = []

    async def ready(transport: Transport) -> None:
        await progress.all_started.wait()
        await wait_until_ready(transport, lambda line: print(line, flush=True))
        if args.inspector:
            web.append(asyncio.create_task(_inspector(transport, args), name="inspector"))
            await asyncio.sleep(0)
        print('ready. Try: react-mem ask "Remember that I like tea" --conversation c1', flush=True)
        if args.inspector:
            print("then open the inspector above to see what was remembered.", flush=True)
        print("Ctrl-C stops everything.", flush=True)

    try:
        await serve(entries, bus, ready=ready, started=progress)
    finally:
        for task in web:
            task.cancel()
        owner.release()
    print("stopped cleanly")


async def _inspector(transport: Transport, args: argparse.Namespace) -> None:
    """The inspector beside the stack; its failure (a port in use) never stops the stack."""
    try:
        from react_mem.inspector.server import serve_inspector
    except ImportError as exc:  # the `inspector` extra is not installed
        print(
            f"react-mem up: no inspector ({exc.name} is missing: "
            "pip install 'react-mem[inspector]')",
            file=sys.stderr,
            flush=True,
        )
        return
    try:
        await serve_inspector(transport, inspect.settings_of(args, "inspector-"))
    except ReactMemError as exc:
        print(f"react-mem up: the inspector did not start: {exc}", file=sys.stderr, flush=True)


def _free_metrics_port(args: argparse.Namespace, bus: BusSettings) -> BusSettings:
    """The demo serves metrics on another free port when its own is taken, and says so."""
    if not bus.metrics or port_free(bus.metrics_port):
        return bus
    taken, args.metrics_port = bus.metrics_port, free_port()
    print(f"metrics port {taken} is in use: the demo serves metrics on {args.metrics_port}")
    return _bus_settings(args)


async def _demo(args: argparse.Namespace) -> int:
    """The stack on a fresh state directory (unless one is given), then two sessions."""
    with tempfile.TemporaryDirectory(prefix="react-mem-demo-") as fresh:
        if "state_dir" not in _bus_given(args):
            args.state_dir = Path(fresh)
        bus = _bus_settings(args)
        owner = _own_state(bus)
        bus = _free_metrics_port(args, bus)
        entries = _stack(args)
        print(f"react-mem demo: the whole stack on the embedded defaults, state in {bus.state_dir}")
        progress = StartupProgress([e.settings.id for e in entries])
        outcome: list[bool] = []

        async def exercise(transport: Transport) -> None:
            try:
                await progress.all_started.wait()
                await wait_until_ready(transport, lambda line: print(line, flush=True))
                outcome.append(await run_demo(transport, sys.stdout))
            finally:
                stopping.set()

        stopping = asyncio.Event()
        try:
            await serve(entries, bus, stopping=stopping, ready=exercise, started=progress)
        finally:
            owner.release()
    print("\nstopped cleanly")
    return 0 if outcome and outcome[0] else 1


async def _run(args: argparse.Namespace) -> None:
    kinds = MemoryKinds.from_entry_points()
    cls = resolve_processor(args.processor, kinds)
    values = _given(args, "processor")
    values.setdefault("id", cls.default_id)
    settings = cls.Settings.load(values, file=args.settings)
    await serve([ProcessorEntry(cls, settings, kinds)], settings)


async def _group(args: argparse.Namespace) -> None:
    kinds = MemoryKinds.from_entry_points()
    entries = load_group(
        args.config, kinds=kinds, settings_file=args.settings, shared=_bus_given(args)
    )
    await serve(entries, _bus_settings(args))


async def _ping_command(args: argparse.Namespace) -> int:
    """Ping a running broker's ping processor; never start a broker (nothing would answer)."""
    queue = f"{args.workspace}:{args.flow}"
    try:
        async with open_bus(_bus_settings(args), start_embedded=False) as transport:
            latencies = await _ping(transport, queue, args.count, wait=args.timeout)
    except BrokerNotRunning as exc:  # its message names the backend and how to start one
        print(f"react-mem ping: {exc}", file=sys.stderr)
        return 1
    except RequestTimeout:
        print(
            f"react-mem ping: no ping processor answered on request:tg:ping:{queue} within "
            f"{args.timeout:g}s (`react-mem up` runs none; start one with `react-mem run ping`)",
            file=sys.stderr,
        )
        return 1
    print(f"p50 {statistics.median(latencies) * 1000:.2f} ms over {len(latencies)}")
    return 0


def _no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """A mistyped or shortened flag is an error, never a guess (in every subcommand)."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _no_abbreviations(child)


def _client_args(parser: argparse.ArgumentParser) -> None:
    _bus_args(parser, processor=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="react-mem",
        description="The react-mem command: run processors, groups, the demo, and diagnostics.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser(
        "up",
        help="run the whole stack (agent, memory, LLM) in one process",
        description="Run the whole stack (agent, memory services, learner, LLM) in one "
        "process on the embedded broker and stores under the state directory, until Ctrl-C.",
    )
    demo = sub.add_parser(
        "demo",
        help="run the stack and a two-session memory demo",
        description="Run the stack on a fresh state directory and two sessions that show "
        "a fact told in the first reaching the second.",
    )
    for p in (up, demo):
        _bus_args(p)
        p.add_argument(
            "--llm",
            choices=["llama-cpp", "openai"],
            default="llama-cpp",
            help="text-completion backend: in-process llama.cpp (default) or an "
            "OpenAI-compatible endpoint",
        )
        p.add_argument("--llm-url", default=None, help="openai: base URL (env OPENAI_BASE_URL)")
        p.add_argument("--llm-model", default=None, help="openai: model name; llama-cpp: unused")

    up.add_argument(
        "--inspector",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve the web memory inspector too (default: on)",
    )
    inspect.add_web_args(up, "inspector-")

    run = sub.add_parser("run", help="run one processor")
    run.add_argument("processor", help="a processor name (ping) or module.Class")
    _processor_args(run)

    group = sub.add_parser("group", help="run a processor group from a YAML file")
    group.add_argument("-c", "--config", type=Path, required=True)
    _bus_args(group)

    ping = sub.add_parser(
        "ping",
        help="ping a flow's ping processor",
        description="Measure round trips to a flow's ping processor (`react-mem run ping`; "
        "`react-mem up` has none) on a running broker; never starts one.",
    )
    _client_args(ping)
    ping.add_argument("--workspace", default="default")
    ping.add_argument("--flow", default="default")
    ping.add_argument("--count", type=int, default=5)
    ping.add_argument(
        "--timeout", type=float, default=5.0, help="seconds to wait for a first answer (5)"
    )
    ask.add_parser(sub, _client_args)
    memory_command.add_parser(sub, _client_args)
    playbook.add_parser(sub, _client_args)
    feedback.add_parser(sub, _client_args)
    trajectories.add_parser(sub, _client_args)
    inspect.add_parser(sub, _client_args)
    _no_abbreviations(parser)
    return parser


# A command may return its exit status (None: 0).
COMMANDS: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, int | None]]] = {
    "demo": _demo,
    "up": _up,
    "run": _run,
    "group": _group,
    "ping": _ping_command,
    "ask": ask.command,
    "memory": memory_command.command,
    "playbook": playbook.command,
    "feedback": feedback.command,
    "trajectories": trajectories.command,
    "inspect": inspect.command,
}


def _report_fatal_signals() -> None:
    """A fatal signal (SIGBUS from a mapped file on a full disk, SIGSEGV in a native
    library) leaves where it struck on stderr instead of an exit status alone. A stderr
    replaced by one without a file descriptor (a caller capturing it) falls back to the
    process's own."""
    try:
        faulthandler.enable(all_threads=True)
    except (AttributeError, ValueError):  # io.UnsupportedOperation is a ValueError
        if sys.__stderr__ is not None:
            faulthandler.enable(sys.__stderr__, all_threads=True)


def main(argv: Sequence[str] | None = None) -> int:
    _report_fatal_signals()
    args = build_parser().parse_args(argv)
    _setup_logging(getattr(args, "log_level", "INFO"))
    try:
        code = asyncio.run(COMMANDS[args.command](args))
    except ReactMemError as exc:
        print(f"react-mem: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (``| head``): stop quietly
        _quiet_stdout()
        return 141
    return code or 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the final flush of a closed pipe raises nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run() -> None:
    """Console-script entry point. Everything is closed by the time ``main`` returns; the
    process then ends at once, because pulsar-client's native threads can crash an
    interpreter that is finalising (seen as SIGSEGV on exit under load)."""
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        code = code or 141
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
