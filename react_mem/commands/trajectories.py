"""``react-mem trajectories list|show|reflect``: the agent's trajectories as episode-memory
records them (task type, outcome, success score, cost, playbook bullets shown and used),
queried by owner, task type, outcome and time; and an on-demand batch reflection over them
that curates its lessons into the playbook (``--apply``)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any, TextIO, get_args

from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.clients.base import Page
from react_mem.clients.episodes import EpisodeClient
from react_mem.clients.playbook import PlaybookClient, PlaybookRef
from react_mem.commands import memory_command
from react_mem.commands.common import (
    NO_STACK_HINT,
    BusArgs,
    ServiceQueues,
    Subparsers,
    bus_settings,
    with_bus,
)
from react_mem.commands.operation import Operation, leaf, owner, scope
from react_mem.commands.table import score, table
from react_mem.errors import BadRequest, ServiceError, ServiceTimeout
from react_mem.learner.batch import MIN_TRAJECTORIES, TooFew, batch_delta, batch_lessons
from react_mem.schema.episodes import Episode, Outcome
from react_mem.schema.playbook import PlaybookResponse

PAGE = 200


def when(value: str) -> float:
    """Epoch seconds, or an ISO date/time (UTC unless it says otherwise)."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither epoch seconds nor an ISO date such as 2026-01-31"
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _day(epoch: float) -> str:
    return f"{datetime.fromtimestamp(epoch, UTC):%Y-%m-%d %H:%M}" if epoch else "-"


def _filters(a: argparse.Namespace) -> dict[str, Any]:
    return {"outcome": a.outcome, "task_type": a.task_type, "since": a.since, "until": a.until}


def _listed(page: Page[Episode], args: argparse.Namespace, out: TextIO) -> str | None:
    if not page.items:
        print(f"no trajectories in {scope(args)}", file=out)
        return None
    rows = [
        [e.id, _day(e.created_at), e.task_type or "-", e.outcome, score(e.score), str(e.tokens),
         f"{len(e.bullets_used)}/{len(e.bullets_shown)}", e.goal]
        for e in page.items
    ]  # fmt: skip
    table(
        out, ["ID", "STORED", "TASK TYPE", "OUTCOME", "SCORE", "TOKENS", "USED/SHOWN", "GOAL"], rows
    )
    if page.next:
        print(f"(more: --offset {page.next})", file=out)
    return None


def _shown(episodes: list[Episode], args: argparse.Namespace, out: TextIO) -> str | None:
    for e in episodes:
        print(f"trajectory {e.id} ({e.outcome}, score {score(e.score)})", file=out)
        facts = {
            "goal": e.goal,
            "stored": _day(e.created_at),
            "task type": e.task_type or "-",
            "session": e.session_id or "-",
            "parent session": e.parent_session_id or "-",
            "cost": f"{e.tokens} tokens, {e.duration_seconds:.1f} s",
            "bullets shown": ", ".join(e.bullets_shown) or "-",
            "bullets used": ", ".join(e.bullets_used) or "-",
        }
        for name, value in facts.items():
            print(f"  {name + ':':16}{value}", file=out)
        for n, step in enumerate(e.steps, 1):
            print(
                f"  step {n}: {step.action or '-'} -> {' '.join(step.observation.split())[:120]}",
                file=out,
            )
        for lesson in e.lessons:
            print(f"  lesson: {lesson}", file=out)
    missing = set(args.ids) - {e.id for e in episodes}
    return f"not found in {scope(args)}: {', '.join(sorted(missing))}" if missing else None


def _wire(episodes: list[Episode]) -> dict[str, Any]:
    return {"episodes": [e.to_wire() for e in episodes]}


LIST: Operation[EpisodeClient, Page[Episode]] = Operation(
    client=EpisodeClient,
    call=lambda c, to, a: c.page(to, limit=a.limit, offset=a.offset, **_filters(a)),
    render=_listed,
    wire=lambda page: _wire(page.items) | {"next_offset": page.next},
)
SHOW: Operation[EpisodeClient, list[Episode]] = Operation(
    client=EpisodeClient,
    call=lambda c, to, a: c.get(to, a.ids),
    render=_shown,
    wire=_wire,
)
#: ``reflect`` takes a listing's options (:func:`leaf`); :func:`reflect` runs it.
REFLECT: Operation[EpisodeClient, Page[Episode]] = Operation(
    client=EpisodeClient,
    call=lambda c, to, a: c.page(to, **_filters(a)),
    render=_listed,
    wire=lambda page: _wire(page.items),
)


def _narrowing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task-type", help="only trajectories of this task type")
    parser.add_argument("--outcome", choices=get_args(Outcome), help="only this outcome")
    parser.add_argument("--since", type=when, help="stored at or after (epoch or ISO date)")
    parser.add_argument("--until", type=when, help="stored before (epoch or ISO date)")


def add_parser(sub: Subparsers, bus: BusArgs) -> None:
    parser = sub.add_parser(
        "trajectories", help="query the agent's trajectories and reflect across them"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    listing = leaf(actions, "list", "list trajectories, newest filter first", LIST, bus)
    listing.add_argument("--limit", type=int, default=20, help="page size (20)")
    listing.add_argument("--offset", help="the page starting at this offset")
    _narrowing(listing)
    show = leaf(actions, "show", "show trajectories in full", SHOW, bus)
    show.add_argument("ids", nargs="+", metavar="ID")
    help = (
        f"batch reflection: lessons across at least {MIN_TRAJECTORIES} trajectories "
        "(per task type, each tool's record); --apply curates them into the playbook"
    )
    reflect_parser = leaf(actions, "reflect", help, REFLECT, bus)
    _narrowing(reflect_parser)
    reflect_parser.add_argument(
        "--max", type=int, default=1000, help="trajectories read at most (1000)"
    )
    reflect_parser.add_argument(
        "--min",
        type=int,
        default=MIN_TRAJECTORIES,
        help=f"fewest to reflect on ({MIN_TRAJECTORIES})",
    )
    reflect_parser.add_argument(
        "--apply", action="store_true", help="add the lessons to the playbook"
    )
    reflect_parser.add_argument("--context", default="", help="playbook context scope")


async def command(args: argparse.Namespace) -> int:
    if args.action == "reflect":
        return await with_bus(bus_settings(args), lambda t: reflect(t, args))
    return await with_bus(bus_settings(args), lambda t: memory_command.execute(t, args))


async def reflect(
    transport: Transport,
    args: argparse.Namespace,
    *,
    episodes_at: ServiceQueues | None = None,
    playbook_at: ServiceQueues | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Read the trajectories, reflect across them, print the lessons, and with ``--apply``
    send them to the owner's playbook as one delta. 0 done, 1 failed, 2 too few."""
    episodes_at = episodes_at or ServiceQueues.of("episode-memory", args.workspace, args.flow)
    playbook_at = playbook_at or ServiceQueues.of("playbook-memory", args.workspace, args.flow)
    rpcs: list[RequestResponseClient[Any, Any]] = []

    async def client(at: ServiceQueues, schema: type[Any]) -> RequestResponseClient[Any, Any]:
        rpc: RequestResponseClient[Any, Any] = RequestResponseClient(
            transport, at.request, at.response, schema, subscriber="react-mem-trajectories"
        )
        await rpc.start()
        rpcs.append(rpc)
        return rpc

    to = owner(args)
    try:
        found: list[Episode] = []
        episodes = EpisodeClient(await client(episodes_at, EpisodeClient.service.response_schema),
                                 timeout=args.timeout)  # fmt: skip
        offset: str | None = None
        while len(found) < args.max:
            page = await episodes.page(
                to, limit=min(PAGE, args.max - len(found)), offset=offset, **_filters(args)
            )
            found += page.items
            offset = page.next
            if offset is None:
                break
        try:
            lessons = batch_lessons(found, min_trajectories=args.min)
        except TooFew as exc:
            print(f"react-mem trajectories: {exc} in {scope(args)}", file=err)
            return 2
        print(f"{len(found)} trajectories read; {len(lessons)} lessons:", file=out)
        for lesson in lessons:
            print(f"  [{lesson.section}] {lesson.content}", file=out)
        if args.apply and lessons:
            which = PlaybookRef(collection=args.collection, context=args.context, user=args.user)
            rpc = await client(playbook_at, PlaybookResponse)
            done = await PlaybookClient(rpc, timeout=args.timeout).apply_delta(
                which, batch_delta(lessons, found, user=args.user)
            )
            what = "already applied" if done.applied is False else f"version {done.version}"
            print(f"curated into the playbook ({what})", file=out)
    except ServiceTimeout:
        print(
            f"react-mem trajectories: no response within {args.timeout:g}s ({NO_STACK_HINT})",
            file=err,
        )
        return 1
    except ServiceError as exc:
        print(f"react-mem trajectories: {exc.service} error ({exc.type}): {exc.detail}", file=err)
        return 1
    except BadRequest as exc:
        print(f"react-mem trajectories: invalid arguments: {exc}", file=err)
        return 2
    finally:
        for rpc in rpcs:
            await rpc.close()
    return 0
