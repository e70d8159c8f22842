"""Episodes (steps, outcome, lessons) and conversations (turns, rolling summary)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from react_mem.inspector.views.common import back, memory, mutation, owner_of, param, render


async def episodes_page(request: Request) -> Response:
    q = request.query_params
    who, offset = owner_of(q), param(q, "offset") or None
    client = await memory(request).episodes(who.where)
    page = await client.page(who.scope(), limit=20, offset=offset)
    return render(
        request, "episodes.html", owner=who, episodes=page.items, offset=offset, following=page.next
    )


async def delete_episodes(request: Request) -> Response:
    form = await mutation(request)
    who = owner_of(form)
    ids = [i for i in form.getlist("id") if isinstance(i, str) and i]
    backend = memory(request)
    deleted = await (await backend.episodes(who.where)).delete(who.scope(), ids) if ids else 0
    await backend.audited(
        who.where, "delete-episodes", collection=who.collection, user=who.user,
        counts={"deleted": deleted},
    )  # fmt: skip
    return back("/episodes", who)


async def conversations_page(request: Request) -> Response:
    q = request.query_params
    who, offset = owner_of(q), param(q, "offset") or None
    client = await memory(request).conversations(who.where)
    page = await client.page(who.scope(), limit=20, offset=offset)
    return render(
        request,
        "conversations.html",
        owner=who,
        conversations=page.items,
        offset=offset,
        following=page.next,
    )


async def conversation_page(request: Request) -> Response:
    q = request.query_params
    who, cid = owner_of(q), param(q, "id")
    client = await memory(request).conversations(who.where)
    found = await client.get(who.scope(cid)) if cid else None
    if found is None:
        raise HTTPException(404, "no such conversation for this user")
    return render(request, "conversation.html", owner=who, conversation=found)


async def end_conversation(request: Request) -> Response:
    form = await mutation(request)
    who, cid = owner_of(form), param(form, "id")
    backend = memory(request)
    await (await backend.conversations(who.where)).end(who.scope(cid))
    await backend.audited(
        who.where, "end-conversation", collection=who.collection, user=who.user, conversation=cid
    )
    return back("/conversation", who, id=cid)


ROUTES = [
    Route("/episodes", episodes_page),
    Route("/episodes/delete", delete_episodes, methods=["POST"]),
    Route("/conversations", conversations_page),
    Route("/conversation", conversation_page),
    Route("/conversation/end", end_conversation, methods=["POST"]),
]
