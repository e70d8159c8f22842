"""``react-mem memory forget --user U [--collection C]``: forget a user everywhere.

Sends ``forget`` to the learner, then to every memory service that holds a user's data
(each memory kind that names a ``client``) at once, and prints one line per service: what it
removed, or why it could not. Dead letters are not reached (see :data:`DEAD_LETTERS`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TextIO, cast

from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.clients.base import Requester, Service
from react_mem.clients.forget import LearnerForgetClient
from react_mem.commands.common import BusArgs, ServiceQueues, Subparsers, flow_args
from react_mem.commands.progress import StatusLine
from react_mem.errors import ConfigurationError, ServiceError, ServiceTimeout
from react_mem.processor.kinds import MemoryKinds
from react_mem.schema.forget import MEMORY_FORGET, Forgotten

LEARNER = "memory-learner"


class Forgetting(Protocol):
    async def forget(self, user: str, *, collection: str = "") -> Forgotten: ...


class Forgetter(Protocol):
    """A typed client class with a ``forget`` operation."""

    service: Service[Any, Any]

    def __call__(self, rpc: Requester[Any, Any], *, timeout: float | None = None) -> Forgetting: ...


def clients(kinds: MemoryKinds) -> dict[str, Forgetter]:
    """Who holds a user's memory, in report order: the memory services, then the learner."""
    found: dict[str, Forgetter] = {}
    for kind in kinds:
        if kind.client is not None:
            cls = kind.client
            if not callable(getattr(cls, "forget", None)):
                raise ConfigurationError(f"{cls.__name__} (of {kind.name}) has no forget")
            found[kind.name] = cast(Forgetter, cls)
    return found | {LEARNER: LearnerForgetClient}


#: Dead-letter queues are persistent topics that pulsar-lite can neither list nor trim.
DEAD_LETTERS = (
    "not reached: dead-letter queues (flow:tg:dlq--...) keep failed messages, a user's "
    "included, until an operator consumes them; on Pulsar, set the namespace's retention"
)


@dataclass(frozen=True, slots=True)
class Report:
    service: str
    #: ``forgotten``, ``not supported``, ``no response`` or ``error``.
    status: str
    forgotten: Forgotten | None = None
    detail: str = ""

    def line(self) -> str:
        if self.forgotten is not None:
            removed = ", ".join(f"{n} {kind}" for kind, n in self.forgotten.records.items())
            compacted = ", ".join(self.forgotten.compacted)
            tail = f"; compacted {compacted}" if compacted else ""
            return f"{self.service}: forgotten {removed or 'nothing'}{tail}"
        return f"{self.service}: {self.status}{': ' + self.detail if self.detail else ''}"


def targets(workspace: str, flow: str, kinds: MemoryKinds) -> dict[str, ServiceQueues]:
    """Every forget destination of a flow: the services' request queues and the learner's
    persistent ``flow:tg:memory-forget`` queue."""
    found = {s: ServiceQueues.of(s, workspace, flow) for s in clients(kinds) if s != LEARNER}
    tail = f"{MEMORY_FORGET}:{workspace}:{flow}"
    found[LEARNER] = ServiceQueues(f"flow:tg:{tail}", f"response:tg:{tail}")
    return found


async def forget_user(
    transport: Transport,
    to: Mapping[str, ServiceQueues],
    *,
    kinds: MemoryKinds,
    user: str,
    collection: str = "",
    timeout: float = 120.0,
    progress: StatusLine | None = None,
) -> list[Report]:
    """Send ``forget`` to the learner, then to the other services of ``to`` at once (each
    through its kind's client); one report per service, in order (and a line on
    ``progress`` as each answers)."""
    started, answered = time.monotonic(), 0
    forgetters = clients(kinds)

    async def one(name: str, queues: ServiceQueues) -> Report:
        nonlocal answered
        report = await _one(transport, forgetters[name], name, queues, user, collection, timeout)
        answered += 1
        if progress is not None:
            took = time.monotonic() - started
            progress.line(f"forget: {answered}/{len(to)} {name} {report.status} ({took:.1f}s)")
        return report

    # The learner first: it waits out what it is learning from the user, so those writes
    # land before the memory services forget, never after.
    first = [one(name, queues) for name, queues in to.items() if name == LEARNER]
    learner = await asyncio.gather(*first)
    rest = await asyncio.gather(*(one(n, q) for n, q in to.items() if n != LEARNER))
    by_name = {r.service: r for r in (*learner, *rest)}
    reports = [by_name[name] for name in to]
    return [*reports, Report("dead-letters", "not reached", detail=DEAD_LETTERS)]


async def _one(
    transport: Transport,
    kind: Forgetter,
    name: str,
    queues: ServiceQueues,
    user: str,
    collection: str,
    timeout: float,
) -> Report:
    rpc: RequestResponseClient[Any, Any] = RequestResponseClient(
        transport,
        queues.request,
        queues.response,
        kind.service.response_schema,
        subscriber="react-mem-forget",
    )
    await rpc.start()
    try:
        forgotten = await kind(rpc, timeout=timeout).forget(user, collection=collection)
    except ServiceTimeout:
        return Report(name, "no response", detail=f"nothing on {queues.response} in {timeout:g}s")
    except ServiceError as exc:
        if exc.type == "bad-operation":
            return Report(name, "not supported", detail="this version has no forget")
        return Report(name, "error", detail=f"{exc.type}: {exc.detail}")
    finally:
        await rpc.close()
    return Report(name, "forgotten", forgotten)


def add_parser(kinds: Subparsers, bus: BusArgs) -> None:
    help = "forget a user: every service's and the learner's records of them"
    parser = kinds.add_parser("forget", help=help, description=help)
    parser.add_argument("-u", "--user", required=True, help="the user to forget")
    parser.add_argument("--collection", default="", help="only this collection (default: all)")
    flow_args(parser)
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for each service (120)"
    )
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask to confirm")
    bus(parser)
    parser.set_defaults(operation=None, log_level="WARNING")


async def execute(
    transport: Transport,
    args: argparse.Namespace,
    *,
    to: Mapping[str, ServiceQueues] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """0: every service forgot (or has nothing to forget with); 1: one did not answer or
    failed (run it again: a forget is idempotent)."""
    if not args.user:
        print("react-mem memory forget: --user must not be empty", file=err)
        return 2
    where = f"collection {args.collection}" if args.collection else "every collection"
    if not args.yes and not _confirmed(f"everything user {args.user} owns in {where}", err):
        return 1
    kinds = MemoryKinds.from_entry_points()
    to = to or targets(args.workspace, args.flow, kinds)
    progress = StatusLine(err, f"forget: waiting for {len(to)} services")
    progress.start()
    try:
        reports = await forget_user(
            transport,
            to,
            kinds=kinds,
            user=args.user,
            collection=args.collection,
            timeout=args.timeout,
            progress=progress,
        )
    finally:
        await progress.stop()
    if args.json:
        rows = [
            {
                "service": r.service,
                "status": r.status,
                "forgotten": r.forgotten.to_wire() if r.forgotten else None,
                "detail": r.detail,
            }
            for r in reports
        ]
        print(json.dumps(rows, indent=2), file=out)
    else:
        for report in reports:
            print(report.line(), file=out)
    failed = [r.service for r in reports if r.status in ("no response", "error")]
    if failed:
        print(f"react-mem memory forget: not done by {', '.join(failed)}; run it again", file=err)
    return 1 if failed else 0


def _confirmed(what: str, err: TextIO) -> bool:
    if not sys.stdin.isatty():
        print(f"react-mem memory forget: this deletes {what}; add --yes to confirm", file=err)
        return False
    print(f"This deletes {what}.", file=err)
    return input("Continue? [y/N] ").strip().lower() in {"y", "yes"}
