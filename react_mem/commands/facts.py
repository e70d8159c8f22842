"""``react-mem memory facts list|search|history|delete|purge`` over fact-memory."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any, TextIO

from react_mem.clients.base import Page
from react_mem.clients.facts import FactClient
from react_mem.commands.common import BusArgs, Subparsers
from react_mem.commands.operation import Operation, leaf, scope
from react_mem.commands.table import plural, score, table
from react_mem.schema.facts import Fact


def _listed(page: Page[Fact], args: argparse.Namespace, out: TextIO) -> str | None:
    if not page.items:
        print(f"no facts in {scope(args)}", file=out)
        return None
    table(out, ["ID", "CONTENT"], [[f.id, f.content] for f in page.items])
    if page.next:
        print(f"(more: --offset {page.next})", file=out)
    return None


def _found(facts: list[Fact], args: argparse.Namespace, out: TextIO) -> str | None:
    if not facts:
        print(f"no facts match in {scope(args)}", file=out)
        return None
    table(out, ["ID", "SCORE", "CONTENT"], [[f.id, score(f.score), f.content] for f in facts])
    return None


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else f"{datetime.fromtimestamp(epoch, UTC):%Y-%m-%d %H:%M}"


def _state(fact: Fact) -> str:
    if fact.superseded_by:
        return "earlier"
    return "disputed" if fact.conflicts_with else "current"


def _history(facts: list[Fact], args: argparse.Namespace, out: TextIO) -> str | None:
    """Oldest first: each version's state, when it held (from its ``valid_at`` or when it
    was stored, until its successor's), and what it said."""
    table(
        out,
        ["ID", "STATE", "FROM", "UNTIL", "CONTENT"],
        [
            [
                f.id,
                _state(f),
                _when(f.valid_at if f.valid_at is not None else f.created_at),
                _when(f.valid_until) if f.superseded_by else "-",
                f.content,
            ]
            for f in facts
        ],
    )
    for f in facts:
        if f.conflicts_with:
            print(f"{f.id} is disputed by {', '.join(f.conflicts_with)}", file=out)
    return None


def _deleted(deleted: int, args: argparse.Namespace, out: TextIO) -> str | None:
    asked = len(args.ids)
    missing = f" ({asked - deleted} not found)" if deleted < asked else ""
    print(f"deleted {plural(deleted, 'fact')}{missing}", file=out)
    return None


def _purged(deleted: int, args: argparse.Namespace, out: TextIO) -> str | None:
    print(f"purged {plural(deleted, 'fact record')} from {scope(args)}", file=out)
    return None


def _purge_scope(args: argparse.Namespace) -> str:
    source = f" learned in conversation {args.conversation}" if args.conversation else ""
    return f"every fact{source} in {scope(args)}, with its history"


def _facts(facts: list[Fact]) -> dict[str, Any]:
    return {"facts": [f.to_wire() for f in facts]}


LIST: Operation[FactClient, Page[Fact]] = Operation(
    client=FactClient,
    call=lambda c, to, a: c.page(to, limit=a.limit, offset=a.offset),
    render=_listed,
    wire=lambda page: _facts(page.items) | {"next_offset": page.next},
)
SEARCH: Operation[FactClient, list[Fact]] = Operation(
    client=FactClient,
    call=lambda c, to, a: c.retrieve(to, a.query, top_k=a.top_k, min_score=a.min_score),
    render=_found,
    wire=_facts,
)
HISTORY: Operation[FactClient, list[Fact]] = Operation(
    client=FactClient,
    call=lambda c, to, a: c.history(to, a.id),
    render=_history,
    wire=_facts,
)
DELETE: Operation[FactClient, int] = Operation(
    client=FactClient,
    call=lambda c, to, a: c.delete(to, a.ids),
    render=_deleted,
    wire=lambda deleted: {"deleted": deleted},
)
PURGE: Operation[FactClient, int] = Operation(
    client=FactClient,
    call=lambda c, to, a: c.purge(to),
    render=_purged,
    wire=lambda deleted: {"deleted": deleted},
    confirm=_purge_scope,
)


def add_parsers(sub: Subparsers, bus: BusArgs) -> None:
    listing = leaf(sub, "list", "list current facts", LIST, bus)
    listing.add_argument("--limit", type=int, default=50, help="page size (50)")
    listing.add_argument("--offset", help="the page starting at this offset")
    listing.add_argument("--conversation", help="only facts learned in this conversation")
    search = leaf(sub, "search", "find the facts most similar to a query", SEARCH, bus)
    search.add_argument("query")
    search.add_argument("-k", "--top-k", type=int, default=10, help="results (10)")
    search.add_argument("--min-score", type=float, help="lowest cosine similarity")
    search.add_argument("--conversation", help="only facts learned in this conversation")
    history = leaf(sub, "history", "every version of a fact, oldest first", HISTORY, bus)
    history.add_argument("id", metavar="ID", help="any version's id")
    delete = leaf(sub, "delete", "delete facts by id", DELETE, bus)
    delete.add_argument("ids", nargs="+", metavar="ID")
    purge = leaf(sub, "purge", "delete every fact in the scope", PURGE, bus)
    purge.add_argument("--conversation", help="only facts learned in this conversation")
