"""playbook-memory's ``grants``: the grants in force on a playbook, listed to its owner only
(an editor, a viewer or anyone else is refused and learns nothing); for generated owners and
grantees, each owner's listing holds exactly their own grants. Over the real broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from tests.test_fuzz_queues import drawn_from
from tests.test_playbook import playbook_service

pytestmark = pytest.mark.broker

_name = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=2, max_size=6)
#: Owners (distinct users), each granting to some users (never themselves).
owners = st.lists(
    st.tuples(_name, st.dictionaries(_name, st.sampled_from(("viewer", "editor")), max_size=3)),
    min_size=2,
    max_size=4,
    unique_by=lambda o: o[0],
).map(lambda drawn: [(u, {g: r for g, r in gs.items() if g != u}) for u, gs in drawn])


async def test_the_owner_lists_the_grants_in_force_and_no_one_else_does(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with playbook_service(transport, registry, tmp_path, unique) as pb:
        assert (await pb.ok("grants", user="alice")).grants == []
        await pb.ok("grant", user="alice", relation="viewer", grantees=["bob", "carol"])
        await pb.ok("grant", user="alice", relation="editor", grantees=["dave"])
        await pb.ok("revoke", user="alice", grantees=["carol"])
        listed = (await pb.ok("grants", user="alice")).grants
        assert [(g.user, g.relation) for g in listed] == [("bob", "viewer"), ("dave", "editor")]
        # the grantees (a viewer, an editor) may not list them; strangers see no playbook
        for who, kind in (("bob", "forbidden"), ("dave", "forbidden"), ("eve", "not-found")):
            reply = await pb.ask("grants", user=who, playbook_owner="alice")
            assert reply.error is not None and reply.error.type == kind, who
            assert not reply.grants and "dave" not in reply.encode().decode()
        for other in (None, "Alice", "*"):  # the collection, look-alikes: their own (none)
            assert (await pb.ok("grants", user=other)).grants == []
        # the collection-wide playbook's grants: for the collection (a request without user)
        await pb.ok("grant", collection_wide=True, relation="editor", grantees=["bob"])
        shared = (await pb.ok("grants", collection_wide=True)).grants
        assert [(g.user, g.relation) for g in shared] == [("bob", "editor")]
        reply = await pb.ask("grants", user="bob", collection_wide=True)
        assert reply.error is not None and reply.error.type == "forbidden"


async def test_each_owners_listing_holds_exactly_their_grants(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
    request: pytest.FixtureRequest,
) -> None:
    rounds = drawn_from(owners, max(1, request.config.getoption("--fuzz-examples") // 5))
    async with playbook_service(transport, registry, tmp_path, unique) as pb:
        for n, drawn in enumerate(rounds):
            collection = f"c{n}"
            for user, granted in drawn:
                for relation in ("viewer", "editor"):
                    to = sorted(g for g, r in granted.items() if r == relation)
                    if to:
                        await pb.ok(
                            "grant", user=user, collection=collection, relation=relation,
                            grantees=to,
                        )  # fmt: skip
            for user, granted in drawn:
                listed = (await pb.ok("grants", user=user, collection=collection)).grants
                assert {(g.user, g.relation) for g in listed} == set(granted.items()), user
                for other, _ in drawn:  # another owner asking for this one's: refused
                    if other == user:
                        continue
                    reply = await pb.ask(
                        "grants", user=other, collection=collection, playbook_owner=user
                    )
                    assert reply.error is not None and not reply.grants, (other, user)
