"""``react-mem memory conversation show|list|end`` over conversation-memory."""

from __future__ import annotations

import argparse
from typing import TextIO

from react_mem.commands.common import BusArgs, Subparsers
from react_mem.commands.operation import Operation, leaf, scope
from react_mem.commands.table import plural, table, when
from react_mem.schema.conversations import (
    Conversation,
    ConversationRequest,
    ConversationResponse,
)

SERVICE = "conversation-memory"


def _request(args: argparse.Namespace, operation: str, **fields: object) -> ConversationRequest:
    return ConversationRequest.model_validate(
        {"operation": operation, "collection": args.collection, "user": args.user, **fields}
    )


def _state(c: Conversation) -> str:
    return f"ended ({c.end_reason or 'explicit'})" if c.ended else "open"


def _indented(label: str, text: str) -> str:
    """``label`` then ``text``, its further lines aligned under the first."""
    return label + text.replace("\n", "\n" + " " * len(label))


def _shown(response: ConversationResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    c = response.conversation
    if c is None:
        return f"no conversation {args.id} in {scope(args)}"
    print(
        f"conversation {c.conversation_id} in {scope(args)}: {plural(c.turn_count, 'turn')}, "
        f"{_state(c)}",
        file=out,
    )
    print(f"started {when(c.created_at)}, last activity {when(c.last_activity)}", file=out)
    if c.summary:
        print(f"summary: {c.summary}", file=out)
    for turn in c.turns:
        result = f"  {turn.result}" if turn.result else ""
        print(f"\n[{turn.sequence + 1}] {when(turn.time)}{result}", file=out)
        print(_indented("  Q: ", turn.query), file=out)
        print(_indented("  A: ", turn.answer), file=out)
        if turn.summary:
            print(_indented("  summary: ", turn.summary), file=out)
    return None


def _listed(response: ConversationResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    if not response.conversations:
        print(f"no conversations in {scope(args)}", file=out)
        return None
    rows = [
        [c.conversation_id, str(c.turn_count), when(c.last_activity), _state(c), c.summary]
        for c in response.conversations
    ]
    table(out, ["ID", "TURNS", "LAST ACTIVITY", "STATE", "SUMMARY"], rows)
    if response.next_offset:
        print(f"(more: --offset {response.next_offset})", file=out)
    return None


def _ended(response: ConversationResponse, args: argparse.Namespace, out: TextIO) -> str | None:
    c = response.conversation
    turns = plural(c.turn_count, "turn") if c is not None else "its turns"
    print(f"ended conversation {args.id} after {turns}", file=out)
    return None


SHOW = Operation(
    service=SERVICE,
    response=ConversationResponse,
    build=lambda a: _request(a, "get", conversation_id=a.id, limit=a.last),
    render=_shown,
)
LIST = Operation(
    service=SERVICE,
    response=ConversationResponse,
    build=lambda a: _request(a, "list", limit=a.limit, offset=a.offset),
    render=_listed,
)
END = Operation(
    service=SERVICE,
    response=ConversationResponse,
    build=lambda a: _request(a, "end", conversation_id=a.id),
    render=_ended,
)


def add_parsers(sub: Subparsers, bus: BusArgs) -> None:
    show = leaf(sub, "show", "show a conversation and its turns", SHOW, bus)
    show.add_argument("id", metavar="ID")
    show.add_argument("--last", type=int, help="only the last N turns")
    listing = leaf(sub, "list", "list conversations (without their turns)", LIST, bus)
    listing.add_argument("--limit", type=int, default=20, help="page size (20)")
    listing.add_argument("--offset", help="the page starting at this offset")
    end = leaf(sub, "end", "end a conversation now (the learner consolidates it)", END, bus)
    end.add_argument("id", metavar="ID")
