"""``react-mem memory facts list|search|delete|purge`` over fact-memory."""

from __future__ import annotations

import argparse
from typing import TextIO

from react_mem.commands.common import BusArgs, Subparsers
from react_mem.commands.operation import Operation, leaf, scope
from react_mem.commands.table import plural, score, table
from react_mem.schema.facts import FactRequest, FactResponse

SERVICE = "fact-memory"


def _request(args: argparse.Namespace, operation: str, **fields: object) -> FactRequest:
    return FactRequest.model_validate(
        {
            "operation": operation,
            "collection": args.collection,
            "user": args.user,
            "conversation_id": getattr(args, "conversation", None),
            **fields,
        }
    )


def _listed(response: FactResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    if not response.facts:
        print(f"no facts in {scope(args)}", file=out)
        return None
    table(out, ["ID", "CONTENT"], [[f.id, f.content] for f in response.facts])
    if response.next_cursor:
        print(f"(more: --cursor {response.next_cursor})", file=out)
    return None


def _found(response: FactResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    if not response.facts:
        print(f"no facts match in {scope(args)}", file=out)
        return None
    table(
        out, ["ID", "SCORE", "CONTENT"], [[f.id, score(f.score), f.content] for f in response.facts]
    )
    return None


def _deleted(response: FactResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    asked = len(args.ids)
    missing = f" ({asked - response.deleted} not found)" if response.deleted < asked else ""
    print(f"deleted {plural(response.deleted, 'fact')}{missing}", file=out)
    return None


def _purged(response: FactResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    print(f"purged {plural(response.deleted, 'fact record')} from {scope(args)}", file=out)
    return None


def _purge_scope(args: argparse.Namespace) -> str:
    source = f" learned in conversation {args.conversation}" if args.conversation else ""
    return f"every fact{source} in {scope(args)}, with its history"


LIST = Operation(
    service=SERVICE,
    response=FactResponse,
    build=lambda a: _request(a, "list", limit=a.limit, cursor=a.cursor),
    render=_listed,
)
SEARCH = Operation(
    service=SERVICE,
    response=FactResponse,
    build=lambda a: _request(a, "retrieve", query=a.query, top_k=a.top_k, min_score=a.min_score),
    render=_found,
)
DELETE = Operation(
    service=SERVICE,
    response=FactResponse,
    build=lambda a: _request(a, "delete", ids=a.ids),
    render=_deleted,
)
PURGE = Operation(
    service=SERVICE,
    response=FactResponse,
    build=lambda a: _request(a, "purge"),
    render=_purged,
    confirm=_purge_scope,
)


def add_parsers(sub: Subparsers, bus: BusArgs) -> None:
    listing = leaf(sub, "list", "list current facts", LIST, bus)
    listing.add_argument("--limit", type=int, default=50, help="page size (50)")
    listing.add_argument("--cursor", help="the page after this cursor")
    listing.add_argument("--conversation", help="only facts learned in this conversation")
    search = leaf(sub, "search", "find the facts most similar to a query", SEARCH, bus)
    search.add_argument("query")
    search.add_argument("-k", "--top-k", type=int, default=10, help="results (10)")
    search.add_argument("--min-score", type=float, help="lowest cosine similarity")
    search.add_argument("--conversation", help="only facts learned in this conversation")
    delete = leaf(sub, "delete", "delete facts by id", DELETE, bus)
    delete.add_argument("ids", nargs="+", metavar="ID")
    purge = leaf(sub, "purge", "delete every fact in the scope", PURGE, bus)
    purge.add_argument("--conversation", help="only facts learned in this conversation")
