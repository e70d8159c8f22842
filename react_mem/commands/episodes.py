"""``react-mem memory episodes list|search|delete|purge`` over episode-memory."""

from __future__ import annotations

import argparse
from typing import TextIO, get_args

from react_mem.commands.common import BusArgs, Subparsers
from react_mem.commands.operation import Operation, leaf, scope
from react_mem.commands.table import plural, score, table
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse, Outcome

SERVICE = "episode-memory"


def _request(args: argparse.Namespace, operation: str, **fields: object) -> EpisodeRequest:
    return EpisodeRequest.model_validate(
        {
            "operation": operation,
            "collection": args.collection,
            "user": args.user,
            "conversation_id": getattr(args, "conversation", None),
            "outcome": getattr(args, "outcome", None),
            **fields,
        }
    )


def _listed(response: EpisodeResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    if not response.episodes:
        print(f"no episodes in {scope(args)}", file=out)
        return None
    rows = [[e.id, e.outcome, score(e.score), e.goal] for e in response.episodes]
    table(out, ["ID", "OUTCOME", "SCORE", "GOAL"], rows)
    if response.next_offset:
        print(f"(more: --offset {response.next_offset})", file=out)
    return None


def _found(response: EpisodeResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    if not response.episodes:
        print(f"no episodes match in {scope(args)}", file=out)
        return None
    rows = [[e.id, score(e.similarity), e.outcome, e.goal] for e in response.episodes]
    table(out, ["ID", "SIMILARITY", "OUTCOME", "GOAL"], rows)
    return None


def _deleted(response: EpisodeResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    count, asked = response.count or 0, len(args.ids)
    missing = f" ({asked - count} not found)" if count < asked else ""
    print(f"deleted {plural(count, 'episode')}{missing}", file=out)
    return None


def _purged(response: EpisodeResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    print(f"purged {plural(response.count or 0, 'episode')} from {scope(args)}", file=out)
    return None


def _purge_scope(args: argparse.Namespace) -> str:
    source = f" of conversation {args.conversation}" if args.conversation else ""
    return f"every episode{source} in {scope(args)}"


LIST = Operation(
    service=SERVICE,
    response=EpisodeResponse,
    build=lambda a: _request(a, "list", limit=a.limit, offset=a.offset),
    render=_listed,
)
SEARCH = Operation(
    service=SERVICE,
    response=EpisodeResponse,
    build=lambda a: _request(a, "retrieve", goal=a.query, top_k=a.top_k, min_score=a.min_score),
    render=_found,
)
DELETE = Operation(
    service=SERVICE,
    response=EpisodeResponse,
    build=lambda a: _request(a, "delete", ids=a.ids),
    render=_deleted,
)
PURGE = Operation(
    service=SERVICE,
    response=EpisodeResponse,
    build=lambda a: _request(a, "purge"),
    render=_purged,
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
