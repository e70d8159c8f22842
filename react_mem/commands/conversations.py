"""``react-mem memory conversation show|list|end`` over conversation-memory."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from react_mem.clients.base import Page
from react_mem.clients.conversations import ConversationClient
from react_mem.commands.common import BusArgs, Subparsers
from react_mem.commands.operation import Operation, leaf, scope
from react_mem.commands.table import plural, table, when
from react_mem.schema.conversations import Conversation
from react_mem.schema.scope import Scope


def _state(c: Conversation) -> str:
    return f"ended ({c.end_reason or 'explicit'})" if c.ended else "open"


def _indented(label: str, text: str) -> str:
    """``label`` then ``text``, its further lines aligned under the first."""
    return label + text.replace("\n", "\n" + " " * len(label))


def _shown(c: Conversation | None, args: argparse.Namespace, out: TextIO) -> str | None:
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


def _listed(page: Page[Conversation], args: argparse.Namespace, out: TextIO) -> str | None:
    if not page.items:
        print(f"no conversations in {scope(args)}", file=out)
        return None
    rows = [
        [c.conversation_id, str(c.turn_count), when(c.last_activity), _state(c), c.summary]
        for c in page.items
    ]
    table(out, ["ID", "TURNS", "LAST ACTIVITY", "STATE", "SUMMARY"], rows)
    if page.next:
        print(f"(more: --offset {page.next})", file=out)
    return None


def _ended(c: Conversation, args: argparse.Namespace, out: TextIO) -> str | None:
    print(f"ended conversation {args.id} after {plural(c.turn_count, 'turn')}", file=out)
    return None


def _named(to: Scope, args: argparse.Namespace) -> Scope:
    """The scope narrowed to the conversation the command names."""
    return to.with_conversation(args.id)


def _conversation(c: Conversation | None) -> dict[str, Any]:
    return {"conversation": None if c is None else c.to_wire()}


SHOW: Operation[ConversationClient, Conversation | None] = Operation(
    client=ConversationClient,
    call=lambda c, to, a: c.get(_named(to, a), limit=a.last),
    render=_shown,
    wire=_conversation,
)
LIST: Operation[ConversationClient, Page[Conversation]] = Operation(
    client=ConversationClient,
    call=lambda c, to, a: c.page(to, limit=a.limit, offset=a.offset),
    render=_listed,
    wire=lambda page: {
        "conversations": [c.to_wire() for c in page.items],
        "next_offset": page.next,
    },
)
END: Operation[ConversationClient, Conversation] = Operation(
    client=ConversationClient,
    call=lambda c, to, a: c.end(_named(to, a)),
    render=_ended,
    wire=_conversation,
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
