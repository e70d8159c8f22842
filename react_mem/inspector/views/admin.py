"""The start page (pickers), the audit log, a user's export, forgetting a user, login."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from react_mem.clients.playbook import PlaybookRef
from react_mem.inspector.auth import COOKIE, SESSION_SECONDS, Gate
from react_mem.inspector.backend import Memory
from react_mem.inspector.views.common import Owner, memory, mutation, owner_of, param, render

#: Records read per request while exporting (the services page at most 200).
EXPORT_PAGE = 200


async def home(request: Request) -> Response:
    who = owner_of(request.query_params)
    await request.app.state.trail.watch(who.where)
    return render(request, "home.html", owner=who, users=request.app.state.trail.users())


async def audit_page(request: Request) -> Response:
    q = request.query_params
    who = owner_of(q)
    trail = request.app.state.trail
    await trail.watch(who.where)
    only = param(q, "only_user") == "1" and who.user
    events = trail.events(who.where, user=who.user if only else None)
    return render(request, "audit.html", owner=who, events=events, only=bool(only))


async def everything(backend: Memory, who: Owner) -> dict[str, Any]:
    """All of ``who``'s memory in the collection, as the services' wire records."""
    facts, episodes, conversations = [], [], []
    fact_client = await backend.facts(who.where)
    offset: str | None = None
    while True:
        page = await fact_client.page(who.scope(), limit=EXPORT_PAGE, offset=offset)
        for fact in page.items:
            record = fact.to_wire()
            if fact.supersedes:  # its earlier values are the user's data too
                chain = await fact_client.history(who.scope(), fact.id)
                record["history"] = [f.to_wire() for f in chain if f.id != fact.id]
            facts.append(record)
        if not (offset := page.next):
            break
    episode_client = await backend.episodes(who.where)
    while True:
        episode_page = await episode_client.page(who.scope(), limit=EXPORT_PAGE, offset=offset)
        episodes += [e.to_wire() for e in episode_page.items]
        if not (offset := episode_page.next):
            break
    talk = await backend.conversations(who.where)
    while True:
        talk_page = await talk.page(who.scope(), limit=EXPORT_PAGE, offset=offset)
        for c in talk_page.items:
            full = await talk.get(who.scope(c.conversation_id))
            conversations.append((full or c).to_wire())
        if not (offset := talk_page.next):
            break
    book = PlaybookRef(collection=who.collection, user=who.user, owner=who.user)
    bullets, playbook = [], await backend.playbook(who.where)
    while True:
        bullet_page = await playbook.page(book, limit=EXPORT_PAGE, offset=offset)
        bullets += [b.to_wire() for b in bullet_page.items]
        if not (offset := bullet_page.next):
            break
    return {
        "workspace": who.workspace,
        "collection": who.collection,
        "user": who.user,
        "facts": facts,
        "episodes": episodes,
        "conversations": conversations,
        "playbook": bullets,
    }


async def export(request: Request) -> Response:
    who = owner_of(request.query_params)
    if not who.user:
        raise HTTPException(400, "export needs a user: /export?user=U")
    backend = memory(request)
    body = await everything(backend, who)
    counts = {k: len(body[k]) for k in ("facts", "episodes", "conversations", "playbook")}
    await backend.audited(
        who.where, "export", collection=who.collection, user=who.user, counts=counts
    )
    name = f"react-mem-{who.collection}-export.json"
    return Response(
        json.dumps(body, indent=2, ensure_ascii=False),
        media_type="application/json",
        headers={"content-disposition": f'attachment; filename="{name}"'},
    )


async def forget_page(request: Request) -> Response:
    who = owner_of(request.query_params)
    return render(request, "forget.html", owner=who, reports=None, error="")


async def forget(request: Request) -> Response:
    form = await mutation(request)
    who = owner_of(form)
    every = param(form, "scope") == "all"
    if not who.user or param(form, "confirm") != who.user:
        error = "Type the user's id exactly to confirm."
        return render(request, "forget.html", 400, owner=who, reports=None, error=error)
    backend = memory(request)
    reports = await backend.forget(who.where, who.user, "" if every else who.collection)
    await backend.audited(
        who.where, "forget-request", collection="" if every else who.collection, user=who.user,
        counts={"services": sum(r.status == "forgotten" for r in reports)},
    )  # fmt: skip
    return render(request, "forget.html", owner=who, reports=reports, error="")


async def login_page(request: Request) -> Response:
    return render(request, "login.html", 401, error="", after=param(request.query_params, "next"))


async def login(request: Request) -> Response:
    form = await request.form()
    gate: Gate = request.app.state.gate
    token = form.get("token")
    after = param(form, "next")
    if not isinstance(token, str) or not gate.token_ok(token.strip()):
        return render(request, "login.html", 401, error="That is not the token.", after=after)
    sid, _ = gate.login()
    # Only a path of this site: never an open redirect.
    target = after if after.startswith("/") and not after.startswith("//") else "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        sid,
        max_age=int(SESSION_SECONDS),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    await mutation(request)
    gate: Gate = request.app.state.gate
    gate.logout(request.cookies.get(COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


ROUTES = [
    Route("/", home),
    Route("/audit", audit_page),
    Route("/export", export),
    Route("/forget", forget_page),
    Route("/forget", forget, methods=["POST"]),
    Route("/login", login_page),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
