"""``react-mem memory episodes list|search|delete|purge`` over episode-memory."""

from __future__ import annotations

import argparse
from typing import Any, TextIO, get_args

from react_mem.clients.base import Page
from react_mem.clients.episodes import EpisodeClient
from react_mem.commands.common import BusArgs, Subparsers
from react_mem.commands.operation import Operation, leaf, scope
from react_mem.commands.table import plural, score, table
from react_mem.schema.episodes import Episode, Outcome


def _listed(page: Page[Episode], args: argparse.Namespace, out: TextIO) -> str | None:
    if not page.items:
        print(f"no episodes in {scope(args)}", file=out)
        return None
    rows = [[e.id, e.outcome, score(e.score), e.goal] for e in page.items]
    table(out, ["ID", "OUTCOME", "SCORE", "GOAL"], rows)
    if page.next:
        print(f"(more: --offset {page.next})", file=out)
    return None


def _found(episodes: list[Episode], args: argparse.Namespace, out: TextIO) -> str | None:
    if not episodes:
        print(f"no episodes match in {scope(args)}", file=out)
        return None
    rows = [[e.id, score(e.similarity), e.outcome, e.goal] for e in episodes]
    table(out, ["ID", "SIMILARITY", "OUTCOME", "GOAL"], rows)
    return None


def _deleted(count: int, args: argparse.Namespace, out: TextIO) -> str | None:
    asked = len(args.ids)
    missing = f" ({asked - count} not found)" if count < asked else ""
    print(f"deleted {plural(count, 'episode')}{missing}", file=out)
    return None


def _purged(count: int, args: argparse.Namespace, out: TextIO) -> str | None:
    print(f"purged {plural(count, 'episode')} from {scope(args)}", file=out)
    return None


def _purge_scope(args: argparse.Namespace) -> str:
    source = f" of conversation {args.conversation}" if args.conversation else ""
    return f"every episode{source} in {scope(args)}"


def _episodes(episodes: list[Episode]) -> dict[str, Any]:
    return {"episodes": [e.to_wire() for e in episodes]}


LIST: Operation[EpisodeClient, Page[Episode]] = Operation(
    client=EpisodeClient,
    call=lambda c, to, a: c.page(to, limit=a.limit, offset=a.offset, outcome=a.outcome),
    render=_listed,
    wire=lambda page: _episodes(page.items) | {"next_offset": page.next},
)
SEARCH: Operation[EpisodeClient, list[Episode]] = Operation(
    client=EpisodeClient,
    call=lambda c, to, a: c.retrieve(
        to, goal=a.query, top_k=a.top_k, min_score=a.min_score, outcome=a.outcome
    ),
    render=_found,
    wire=_episodes,
)
DELETE: Operation[EpisodeClient, int] = Operation(
    client=EpisodeClient,
    call=lambda c, to, a: c.delete(to, a.ids),
    render=_deleted,
    wire=lambda count: {"count": count},
)
PURGE: Operation[EpisodeClient, int] = Operation(
    client=EpisodeClient,
    call=lambda c, to, a: c.purge(to),
    render=_purged,
    wire=lambda count: {"count": count},
    confirm=_purge_scope,
)


def _narrowing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", help="only episodes of this conversation")
    parser.add_argument("--outcome", choices=get_args(Outcome), help="only this outcome")


def add_parsers(sub: Subparsers, bus: BusArgs) -> None:
    listing = leaf(sub, "list", "list recorded episodes", LIST, bus)
    listing.add_argument("--limit", type=int, default=20, help="page size (20)")
    listing.add_argument("--offset", help="the page starting at this offset")
    _narrowing(listing)
    search = leaf(sub, "search", "find the episodes whose goal resembles a query", SEARCH, bus)
    search.add_argument("query")
    search.add_argument("-k", "--top-k", type=int, default=10, help="results (10)")
    search.add_argument("--min-score", type=float, help="lowest cosine similarity")
    _narrowing(search)
    delete = leaf(sub, "delete", "delete episodes by id", DELETE, bus)
    delete.add_argument("ids", nargs="+", metavar="ID")
    purge = leaf(sub, "purge", "delete every episode in the scope", PURGE, bus)
    purge.add_argument("--conversation", help="only episodes of this conversation")
