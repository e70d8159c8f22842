"""The playbook, a user's private one or the collection's shared one: bullets with their
counters and scores, versions with a diff between two, rollback, grants, deletes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from react_mem.clients.playbook import PlaybookRef
from react_mem.errors import BadRequest
from react_mem.inspector.views.common import Owner, back, memory, mutation, owner_of, param, render
from react_mem.schema.playbook import Bullet


def _which(who: Owner, values: Any) -> tuple[PlaybookRef, bool, str]:
    shared = param(values, "shared") == "1" or not who.user
    context = param(values, "context")
    which = PlaybookRef(
        collection=who.collection,
        context=context,
        user=None if shared else who.user,
        collection_wide=shared,
    )
    return which, shared, context


def _version(raw: str) -> int | None:
    return int(raw) if raw.isdigit() else None


@dataclass(frozen=True, slots=True)
class Diff:
    added: list[Bullet]
    removed: list[Bullet]
    changed: list[tuple[Bullet, Bullet]]


def diff(old: list[Bullet], new: list[Bullet]) -> Diff:
    """What changed from ``old`` to ``new``, bullet by bullet (by id)."""
    before, after = {b.id: b for b in old}, {b.id: b for b in new}
    return Diff(
        added=[b for i, b in after.items() if i not in before],
        removed=[b for i, b in before.items() if i not in after],
        changed=[
            (before[i], b)
            for i, b in after.items()
            if i in before
            and (before[i].content, before[i].helpful, before[i].harmful, before[i].neutral)
            != (b.content, b.helpful, b.harmful, b.neutral)
        ],
    )


async def playbook_page(request: Request) -> Response:
    q = request.query_params
    who = owner_of(q)
    which, shared, context = _which(who, q)
    client = await memory(request).playbook(who.where)
    offset = param(q, "offset") or None
    page = await client.page(which, limit=100, offset=offset)
    stats = await client.stats(which)
    history = (await client.history(which, limit=20)).history
    # The grants in force: only the owner may list them (the section shows for the owner).
    owned = not shared or not who.user
    in_force = await client.grants(which) if owned else []
    a, b = _version(param(q, "a")), _version(param(q, "b"))
    changes = None
    if a is not None and b is not None:
        changes = diff(await client.show(which, a), await client.show(which, b))
    return render(
        request,
        "playbook.html",
        owner=who,
        shared=shared,
        context=context,
        bullets=page.items,
        following=page.next,
        stats=stats,
        history=history,
        a=a,
        b=b,
        changes=changes,
        grants=in_force,
    )


async def _change(request: Request) -> tuple[FormData, Owner, PlaybookRef, bool]:
    form = await mutation(request)
    who = owner_of(form)
    which, shared, _ = _which(who, form)
    return form, who, which, shared


def _back(who: Owner, shared: bool, form: FormData) -> Response:
    return back("/playbook", who, shared="1" if shared else None, context=param(form, "context"))


async def rollback(request: Request) -> Response:
    form, who, which, shared = await _change(request)
    version = _version(param(form, "version"))
    if version is None:
        raise BadRequest("rollback needs a version number", type="invalid")
    backend = memory(request)
    reply = await (await backend.playbook(who.where)).rollback(which, version)
    await backend.audited(
        who.where, "rollback-playbook", collection=who.collection, user=which.user,
        counts={"to_version": version, "version": reply.version or 0},
    )  # fmt: skip
    return _back(who, shared, form)


async def grants(request: Request) -> Response:
    form, who, which, shared = await _change(request)
    grantees = [g.strip() for g in param(form, "grantees").split(",") if g.strip()]
    relation = param(form, "relation")
    if not grantees:
        raise BadRequest("name at least one user to grant to or revoke from", type="invalid")
    client = await memory(request).playbook(who.where)
    if relation == "revoke":
        await client.revoke(which, grantees)
    elif relation in ("viewer", "editor"):
        rel: Literal["viewer", "editor"] = "viewer" if relation == "viewer" else "editor"
        await client.grant(which, rel, grantees)
    else:
        raise BadRequest("relation must be viewer, editor or revoke", type="invalid")
    await memory(request).audited(
        who.where, f"playbook-{relation}", collection=who.collection, user=which.user,
        grantees=grantees,
    )  # fmt: skip
    return _back(who, shared, form)


async def delete_bullets(request: Request) -> Response:
    form, who, which, shared = await _change(request)
    ids = [i for i in form.getlist("id") if isinstance(i, str) and i]
    backend = memory(request)
    removed = await (await backend.playbook(who.where)).delete(which, ids) if ids else {}
    await backend.audited(
        who.where, "delete-bullets", collection=who.collection, user=which.user, counts=removed
    )
    return _back(who, shared, form)


ROUTES = [
    Route("/playbook", playbook_page),
    Route("/playbook/rollback", rollback, methods=["POST"]),
    Route("/playbook/grants", grants, methods=["POST"]),
    Route("/playbook/delete", delete_bullets, methods=["POST"]),
]
