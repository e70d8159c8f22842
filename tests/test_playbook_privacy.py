"""Playbook privacy over the real broker and edge store (issue 13, defects 2 and 3): a
user's lessons are their own private playbook, seen by no other requester in any operation;
sharing reaches exactly the grantee; share needs an editor of the collection-wide
playbook; delete, purge and forget leave the bullet nowhere (bullets, kept versions, delta
records, the store's files)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.playbook import Delta, PlaybookResponse
from tests.test_playbook import Service, add, op, playbook_service

pytestmark = pytest.mark.broker

#: Requesters that are not alice: no user (both spellings), her name in another case,
#: wildcards, a blank, another user.
OTHERS: tuple[str | None, ...] = (None, "", "Alice", "ALICE", "alice ", "*", "%", " ", "bob")
CANARY = "zebracanary7731"


@pytest.fixture
async def pb(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[Service]:
    async with playbook_service(transport, registry, tmp_path, unique) as service:
        yield service


def text(response: PlaybookResponse) -> str:
    return response.encode().decode()


async def alice_lesson(pb: Service, content: str = f"Ask for the {CANARY} code.") -> str:
    [id] = await pb.added(add(content), user="alice", delta_id=f"alice-{content}")
    return id


async def test_a_users_bullet_reaches_no_other_requester_through_any_operation(
    pb: Service,
) -> None:
    collection = await pb.added(add("Check the units of every quantity."))
    # The collection's bullet is everyone's; alice's only hers.
    assert [b.id for b in await pb.listed(user="bob")] == collection
    id = await alice_lesson(pb)

    async def hers() -> list[object]:
        return [b for b in await pb.listed(user="alice") if b.user == "alice"]

    mine = await hers()
    assert [b.id for b in mine] == [id]
    for other in OTHERS:
        asked = [
            ("retrieve", {"query": f"{CANARY} code", "top_k": 200}),
            ("list", {"limit": 1000}),
            ("get", {"ids": [id]}),
            ("history", {"limit": 1000}),
            ("show", {"version": 1}),
            ("stats", {}),
            ("rollback", {"version": 0}),
            ("apply-delta", {"delta": Delta(delta_id="x", operations=[op("TAG", id, helpful=1)])}),
            ("apply-delta", {"delta": Delta(delta_id="y", operations=[op("REMOVE", id)])}),
            ("delete", {"ids": [id]}),
            ("share", {"ids": [id]}),
            ("purge", {}),
        ]
        for operation, fields in asked:
            for target in ({}, {"playbook_owner": "alice"}):
                reply = await pb.ask(operation, user=other, **target, **fields)
                assert CANARY not in text(reply), (other, operation, target)
                if operation not in ("get", "delete"):
                    assert id not in text(reply), (other, operation, target)
                if target and other != "alice":
                    assert reply.error is not None and reply.error.type == "not-found"
        assert await hers() == mine, other  # nothing changed it either


async def test_a_grant_shows_the_playbook_to_the_grantee_only(pb: Service) -> None:
    id = await alice_lesson(pb)
    assert (
        await pb.ask(
            "grant", user="bob", playbook_owner="alice", relation="viewer", grantees=["bob"]
        )
    ).error is not None  # only the owner grants
    await pb.ok("grant", user="alice", relation="viewer", grantees=["bob"])
    assert id in {b.id for b in await pb.listed(user="bob")}
    found = (await pb.ok("retrieve", user="bob", query=f"{CANARY} code")).bullets
    assert id in {b.id for b in found}
    history = await pb.ok("history", user="bob", playbook_owner="alice")
    assert [r.delta_id for r in history.history] == [f"alice-Ask for the {CANARY} code."]
    assert [r.user for r in history.history] == [None]  # not who wrote it
    for other in OTHERS:
        if other != "bob":
            assert CANARY not in text(await pb.ok("list", user=other, limit=1000)), other
    # A viewer reads, but does not write.
    update = Delta(delta_id="u1", operations=[op("UPDATE", id, content="Ask politely.")])
    reply = await pb.ask("apply-delta", user="bob", playbook_owner="alice", delta=update)
    assert reply.error is not None and reply.error.type == "forbidden"
    # An editor writes.
    await pb.ok("grant", user="alice", relation="editor", grantees=["bob"])
    await pb.ok("apply-delta", user="bob", playbook_owner="alice", delta=update)
    assert (await pb.one(id, user="alice")).content == "Ask politely."
    # Revoked: gone from bob's view again.
    await pb.ok("revoke", user="alice", grantees=["bob"])
    assert id not in {b.id for b in await pb.listed(user="bob")}
    assert (await pb.ask("get", user="bob", ids=[id])).bullets == []


async def test_share_needs_an_editor_of_the_collection_and_moves_the_bullet(
    pb: Service,
) -> None:
    id = await alice_lesson(pb, "Confirm the date format before parsing dates.")
    reply = await pb.ask("share", user="alice", ids=[id])
    assert reply.error is not None and reply.error.type == "forbidden"
    assert (
        await pb.ask(
            "grant", user="alice", collection_wide=True, relation="editor", grantees=["alice"]
        )
    ).error is not None  # not the collection's owner
    await pb.ok("grant", collection_wide=True, relation="editor", grantees=["alice"])
    shared = await pb.ok("share", user="alice", ids=[id])
    [added] = [c.bullet_id for c in shared.changes if c.change == "added"]
    for reader in (None, "bob", "alice"):
        contents = [b.content for b in await pb.listed(user=reader)]
        assert contents == ["Confirm the date format before parsing dates."], reader
    assert (await pb.one(added)).user == "alice"  # the collection knows who wrote it
    assert (await pb.one(added, user="bob")).user is None  # another user does not
    assert (await pb.ok("list", user="alice", limit=1000)).bullets[0].id == added


def hits(root: Path, needle: str) -> list[str]:
    data = needle.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


async def test_purge_and_forget_leave_the_users_words_nowhere(pb: Service, tmp_path: Path) -> None:
    store = tmp_path / "playbook"
    bob = await pb.added(add("Prefer primary sources."), user="bob")
    # alice: lessons in two contexts, a later version, and words in the collection's
    # playbook as its editor.
    first = await alice_lesson(pb)
    await pb.delta(op("TAG", first, helpful=1), user="alice")
    await pb.added(add(f"Spell {CANARY} slowly."), user="alice", context_scope_id="games")
    await pb.ok("grant", collection_wide=True, relation="editor", grantees=["alice"])
    await pb.added(add("Read the manual first."))
    shared = Delta(
        delta_id="alice-shared",
        operations=[add(f"Quote {CANARY} twice.")],
        reason=f"because {CANARY}",
    )
    await pb.ok("apply-delta", user="alice", collection_wide=True, delta=shared)
    await pb.ok("grant", user="alice", relation="viewer", grantees=["bob"])

    await pb.processor.memory.store.inner.flush()  # the engine under the retry policy
    assert hits(store, CANARY)  # on disk, as plain text, before

    purged = await pb.ok("purge", user="alice", context_scope_id="games")
    assert purged.removed["bullets"] == 1 and purged.removed["snapshots"] >= 1
    assert await pb.listed(user="alice", context_scope_id="games") == []
    assert (await pb.ok("history", user="alice", context_scope_id="games")).history == []

    forgot = await pb.ok("forget", user="alice", collection="")
    assert forgot.collections == ["default"] and forgot.removed["bullets"] >= 2
    assert forgot.forgotten is not None and forgot.forgotten.records == forgot.removed
    assert forgot.forgotten.compacted == ["playbook-384", "playbook-history-1"]
    for reader in (None, "alice", "bob"):
        for context in ("", "games"):
            fields = {"user": reader, "context_scope_id": context}
            assert CANARY not in text(await pb.ok("list", limit=1000, **fields))
            history = await pb.ok("history", limit=1000, **fields)
            assert CANARY not in text(history)
            for record in history.history:
                shown = await pb.ok("show", version=record.version, **fields)
                assert CANARY not in text(shown), (reader, context, record.version)
    # Others keep theirs; the collection keeps its own lesson.
    assert bob[0] in {b.id for b in await pb.listed(user="bob")}
    assert "Read the manual first." in {b.content for b in await pb.listed()}
    await pb.processor.memory.store.inner.flush()  # the engine under the retry policy
    assert hits(store, CANARY) == []
