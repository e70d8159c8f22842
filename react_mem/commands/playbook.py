"""``react-mem playbook show|search|export|history|rollback|grant|revoke|share|delete|purge``:
inspect and manage the ACE playbook of a collection and context scope over the bus, in seed
003's prompt format (ids, counters). ``--user`` acts as that user (their private playbook
and what is shared with them; none: the collection-wide playbook); ``--owner`` and
``--collection-wide`` pick another playbook the user has a relation to."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from react_mem.agent.items import bullet_line, section_heading
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.clients.playbook import PLAYBOOK_MEMORY, PlaybookClient, PlaybookRef
from react_mem.commands.common import (
    NO_STACK_HINT,
    BusArgs,
    ServiceQueues,
    Subparsers,
    bus_settings,
    flow_args,
    with_bus,
)
from react_mem.commands.progress import StatusLine
from react_mem.commands.table import plural, score, table, when
from react_mem.errors import BadRequest, ServiceError, ServiceTimeout
from react_mem.schema.playbook import Bullet, DeltaRecord, PlaybookResponse, Weights

SERVICE = PLAYBOOK_MEMORY.name
PRESETS = ("default", "relevance-dominant")
#: Bullets per ``list`` page fetched for show and export.
PAGE = 200


#: Runs one subcommand: asks the service, writes to ``out``, returns the exit status.
Action = Callable[["Cli", argparse.Namespace, TextIO], Awaitable[int]]


class Cli:
    """The playbook client and the playbook the arguments name; ``fetched`` reports
    progress while a listing takes several pages."""

    def __init__(
        self, client: PlaybookClient, args: argparse.Namespace, progress: StatusLine
    ) -> None:
        self.client, self.progress = client, progress
        self.which = PlaybookRef(
            collection=args.collection,
            context=args.context_scope,
            user=args.user or None,
            owner=args.owner or None,
            collection_wide=args.collection_wide,
        )


def _scope(args: argparse.Namespace) -> str:
    context = f", context scope {args.context_scope}" if args.context_scope else ""
    return f"collection {args.collection}{context}"


def _json(out: TextIO, response: PlaybookResponse) -> None:
    print(json.dumps(response.to_wire(), indent=2), file=out)


async def _current(cli: Cli, args: argparse.Namespace) -> list[Bullet]:
    """Every current bullet (of ``--section``, if given), page by page."""
    bullets: list[Bullet] = []
    offset: str | None = None
    while True:
        page = await cli.client.page(
            cli.which, limit=PAGE, offset=offset, section=args.section or None
        )
        bullets += page.items
        offset = page.next
        if bullets and (offset or len(bullets) > len(page.items)):
            more = ", more to come" if offset else ", all"  # a line per page when several
            cli.progress.line(f"{args.action}: {plural(len(bullets), 'bullet')} fetched{more}")
        if not offset:
            return bullets


async def _show(cli: Cli, args: argparse.Namespace, out: TextIO) -> int:
    if args.version is None:
        bullets = await _current(cli, args)
    else:
        shown = await cli.client.show(cli.which, args.version)
        bullets = [b for b in shown if not args.section or b.section == args.section]
        bullets.sort(key=lambda b: (b.section, b.created_at, b.id))  # as ``list`` orders them
    if args.json:
        _json(out, PlaybookResponse(bullets=bullets))
    elif bullets:
        print(listing(bullets), file=out)
    else:
        at = f" at version {args.version}" if args.version is not None else ""
        section = f" in section {args.section}" if args.section else ""
        print(f"no bullets{section} in {_scope(args)}{at}", file=out)
    return 0


def listing(bullets: list[Bullet]) -> str:
    """The prompt's playbook format (seed 003's), each line with the bullet's evidence-based
    confidence (seed 002) when it has one: ``- [id] content (helpful=5, harmful=0,
    confidence=1.00)``."""
    groups: dict[str, list[str]] = {}
    for b in bullets:
        line = bullet_line(b)
        if b.confidence is not None:
            line = f"{line[:-1]}, confidence={b.confidence:.2f})"
        groups.setdefault(section_heading(b.section), []).append(line)
    return "\n\n".join("\n".join([heading, *lines]) for heading, lines in groups.items())


def _weights(value: str) -> str | Weights:
    """A preset name, or explicit weights as JSON (``{"relevance": 0.7, ...}``)."""
    if value in PRESETS:
        return value
    try:
        return Weights.model_validate_json(value)
    except ValidationError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither a preset ({', '.join(PRESETS)}) nor JSON weights"
        ) from None


async def _search(cli: Cli, args: argparse.Namespace, out: TextIO) -> int:
    found = await cli.client.retrieve(
        cli.which,
        args.query,
        top_k=args.top_k,
        weights=args.weights,
        relevance=args.relevance,
        topic=args.topic,
        advance_clock=False,  # looking is not using: the decay clock stays put
    )
    if args.json:
        _json(out, PlaybookResponse(bullets=found))
    elif not found:
        print(f"no bullets match in {_scope(args)}", file=out)
    else:
        rows = [
            [
                b.id,
                score(b.score),
                score(b.relevance),
                score(b.strength),
                f"{b.helpful}/{b.harmful}",
                b.section,
                b.content,
            ]
            for b in found
        ]
        headers = ["ID", "SCORE", "RELEVANCE", "STRENGTH", "HELPFUL/HARMFUL", "SECTION", "CONTENT"]
        table(out, headers, rows)
    return 0


async def _export(cli: Cli, args: argparse.Namespace, out: TextIO) -> int:
    bullets = await _current(cli, args)
    if args.format == "markdown":
        print(listing(bullets), file=out)
        return 0
    stats = await cli.client.stats(cli.which)
    document = {
        "collection": args.collection,
        "context_scope_id": args.context_scope,
        "version": stats.version,
        "bullets": [b.to_wire() for b in bullets],
    }
    if args.format == "json":
        print(json.dumps(document, indent=2), file=out)
    else:
        print(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), end="", file=out)
    return 0


def changes(record: DeltaRecord) -> str:
    """``added 2, tagged 1`` (in the order the kinds first occur), or ``none``."""
    counts = Counter(c.change for c in record.changes)
    return ", ".join(f"{kind} {n}" for kind, n in counts.items()) or "none"


async def _history(cli: Cli, args: argparse.Namespace, out: TextIO) -> int:
    response = await cli.client.history(cli.which, limit=args.limit)
    if args.json:
        _json(out, response)
    elif not response.history:
        print(f"no playbook history in {_scope(args)}", file=out)
    else:
        rows = [
            [str(r.version), when(r.applied_at), r.delta_id, r.source or "-", changes(r)]
            for r in response.history
        ]
        table(out, ["VERSION", "APPLIED", "DELTA", "SOURCE", "CHANGES"], rows)
    return 0


async def _rollback(cli: Cli, args: argparse.Namespace, out: TextIO) -> int:
    response = await cli.client.rollback(cli.which, args.version)
    if args.json:
        _json(out, response)
    else:
        now = f": now version {response.version}" if response.version is not None else ""
        count = f" ({plural(len(response.bullets), 'bullet')})" if response.bullets else ""
        print(f"rolled {_scope(args)} back to version {args.version}{now}{count}", file=out)
    return 0


async def _manage(cli: Cli, args: argparse.Namespace, out: TextIO) -> int:
    """grant, revoke, share, delete, purge."""
    if args.action == "purge" and not args.yes:
        print(f"purge deletes the playbook of {_scope(args)} with its history; add --yes", file=out)
        return 1
    client, which = cli.client, cli.which
    if args.action == "grant":
        response = await client.grant(which, args.relation, args.users)
    elif args.action == "revoke":
        response = await client.revoke(which, args.users)
    elif args.action == "share":
        response = await client.share(which, args.ids)
    elif args.action == "delete":
        response = PlaybookResponse(removed=await client.delete(which, args.ids))
    else:
        response = PlaybookResponse(removed=await client.purge(which))
    if args.json:
        _json(out, response)
    elif response.removed:
        removed = ", ".join(f"{kind} {n}" for kind, n in sorted(response.removed.items()))
        print(f"{args.action}: removed {removed}", file=out)
    else:
        print(f"{args.action}: done in {_scope(args)}", file=out)
    return 0


def add_parser(sub: Subparsers, bus: BusArgs) -> None:
    parser = sub.add_parser(
        "playbook", help="show, search, export, roll back, share and delete the playbook"
    )
    actions = parser.add_subparsers(dest="action", required=True)

    def leaf(name: str, help: str, action: Action) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help, description=help)
        p.add_argument("--collection", default="default", help="collection (default: default)")
        p.add_argument(
            "--context-scope", default="", help='context scope id (default: "", the shared one)'
        )
        flow_args(p)
        p.add_argument("-u", "--user", default="", help="act as this user (default: none)")
        p.add_argument("--owner", default="", help="another user's playbook shared with --user")
        p.add_argument(
            "--collection-wide", action="store_true", help="the collection-wide playbook"
        )
        p.add_argument("--json", action="store_true", help="print the service's JSON response")
        p.add_argument(
            "--timeout", type=float, default=30.0, help="seconds to wait for the service (30)"
        )
        bus(p)
        p.set_defaults(run=action, log_level="WARNING")
        return p

    show = leaf("show", "the playbook as the agent sees it (seed 003 format)", _show)
    show.add_argument("--section", help="only this section")
    show.add_argument("--version", type=int, help="as it was at this version (default: now)")
    search = leaf("search", "the bullets a query would recall, with scores", _search)
    search.add_argument("query")
    search.add_argument("-k", "--top-k", type=int, default=10, help="results (10)")
    search.add_argument(
        "--weights",
        type=_weights,
        default="default",
        help='"default", "relevance-dominant" or JSON {"relevance":..,"strength":..,"type":..}',
    )
    search.add_argument("--relevance", choices=["embedding", "jaccard"], default="embedding")
    search.add_argument("--topic", help="boost bullets of this topic")
    export = leaf("export", "every current bullet, all fields", _export)
    export.add_argument("--format", choices=["json", "yaml", "markdown"], default="json")
    export.set_defaults(section=None)
    history = leaf("history", "applied deltas, newest first", _history)
    history.add_argument("--limit", type=int, default=20, help="versions (20)")
    rollback = leaf("rollback", "make an earlier version the current playbook", _rollback)
    rollback.add_argument("version", type=int)
    rollback.add_argument("-y", "--yes", action="store_true", help="do not ask to confirm")
    grant = leaf("grant", "share the playbook with users (its owner only)", _manage)
    grant.add_argument("users", nargs="+")
    grant.add_argument("--relation", choices=["viewer", "editor"], default="viewer")
    leaf("revoke", "stop sharing the playbook with users", _manage).add_argument("users", nargs="+")
    leaf("share", "move bullets into the collection-wide playbook", _manage).add_argument(
        "ids", nargs="+"
    )
    leaf("delete", "delete bullets and their traces in the history", _manage).add_argument(
        "ids", nargs="+"
    )
    purge = leaf("purge", "delete the playbook with its history and grants", _manage)
    purge.add_argument("-y", "--yes", action="store_true", help="confirm")


async def command(args: argparse.Namespace) -> int:
    return await with_bus(bus_settings(args), lambda transport: execute(transport, args))


async def execute(
    transport: Transport,
    args: argparse.Namespace,
    *,
    queues: ServiceQueues | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run the playbook subcommand ``args`` describe: 0 done, 1 failed, 2 bad arguments."""
    queues = queues or ServiceQueues.of(SERVICE, args.workspace, args.flow)
    if args.action == "rollback" and not args.yes and not _confirmed(args, err):
        return 1
    rpc: RequestResponseClient[Any, PlaybookResponse] = RequestResponseClient(
        transport, queues.request, queues.response, PlaybookResponse, subscriber="react-mem-cli"
    )
    progress = StatusLine(err, f"waiting for {SERVICE}")
    await rpc.start()
    try:
        cli = Cli(PlaybookClient(_Waiting(rpc, progress), timeout=args.timeout), args, progress)
        run: Action = args.run
        return await run(cli, args, out)
    except ServiceTimeout:
        message = (
            f"no response from {SERVICE} on {queues.request} within {args.timeout:g}s "
            f"({NO_STACK_HINT})"
        )
    except ServiceError as exc:
        message = f"{SERVICE} error ({exc.type}): {exc.detail}"
    except BadRequest as exc:  # refused before anything was sent
        print(f"react-mem playbook: invalid arguments: {exc}", file=err)
        return 2
    finally:
        await progress.stop()
        await rpc.close()
    print(f"react-mem playbook: {message}", file=err)
    return 1


class _Waiting:
    """The request/response client, the progress line drawn while each request waits (and
    erased before anything is printed)."""

    def __init__(
        self, rpc: RequestResponseClient[Any, PlaybookResponse], progress: StatusLine
    ) -> None:
        self._rpc, self._progress = rpc, progress

    async def request(
        self,
        message: Any,
        *,
        timeout: float | None = None,
        sent: Callable[[], None] | None = None,
    ) -> PlaybookResponse:
        self._progress.start()
        try:
            return await self._rpc.request(message, timeout=timeout, sent=sent)
        finally:
            await self._progress.stop()

    def stream(
        self, message: Any, *, last: Callable[[Any], bool], timeout: float | None = None
    ) -> AsyncIterator[PlaybookResponse]:
        return self._rpc.stream(message, last=last, timeout=timeout)


def _confirmed(args: argparse.Namespace, err: TextIO) -> bool:
    what = (
        f"replaces the playbook of {_scope(args)} with its bullets as of version "
        f"{args.version} (as a new version; the history is kept)"
    )
    if not sys.stdin.isatty():
        print(f"react-mem playbook: this {what}; add --yes to confirm", file=err)
        return False
    print(f"This {what}.", file=err)
    return input("Continue? [y/N] ").strip().lower() in {"y", "yes"}
