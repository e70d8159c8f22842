"""Facts: a user's facts listed or searched (hybrid), one fact with its provenance, edits."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from react_mem.errors import BadRequest
from react_mem.inspector.views.common import (
    back,
    memory,
    mutation,
    owner_of,
    param,
    render,
)
from react_mem.schema.conversations import ConversationTurn
from react_mem.schema.facts import FACT_SORTS, Fact, FactInput
from react_mem.schema.retrieval import RetrievalOptions

#: How facts may be ordered: a listing is ordered by fact-memory's ``sorted`` over all of the
#: owner's facts; a search's results (``relevance`` only there) are ordered here.
SORTS = {
    "relevance": None,
    "time": lambda f: -(f.updated_at or f.created_at),
    "importance": lambda f: -f.importance,
    "access": lambda f: -f.access_count,
}
PAGE_SIZES = (20, 50, 100)


def _size(raw: str) -> int:
    try:
        size = int(raw or 50)
    except ValueError:
        return 50
    return size if size in PAGE_SIZES else 50


def _sorted(facts: list[Fact], sort: str) -> list[Fact]:
    key = SORTS.get(sort)
    return facts if key is None else sorted(facts, key=key)


async def facts_page(request: Request) -> Response:
    q = request.query_params
    who = owner_of(q)
    query, offset = param(q, "q").strip(), param(q, "offset") or None
    sort = param(q, "sort") or ("relevance" if query else "time")
    limit = _size(param(q, "limit"))
    client = await memory(request).facts(who.where)
    following, total = None, None
    if query:
        found = await client.retrieve(
            who.scope(), query, top_k=limit, retrieval=RetrievalOptions(mode="hybrid")
        )
        facts = _sorted(found, sort)
    else:
        if sort not in FACT_SORTS:
            raise BadRequest(f"sort must be one of {', '.join(FACT_SORTS)}", type="invalid")
        page, total = await client.sorted_page(who.scope(), sort, limit=limit, offset=offset)
        facts, following = page.items, page.next
    template = "facts_rows.html" if request.headers.get("hx-target") == "results" else "facts.html"
    return render(
        request,
        template,
        owner=who,
        facts=facts,
        total=total,
        query=query,
        sort=sort,
        sorts=[s for s in SORTS if query or s != "relevance"],
        limit=limit,
        sizes=PAGE_SIZES,
        offset=offset,
        following=following,
    )


async def _source_turn(request: Request, fact: Fact) -> ConversationTurn | None:
    """The conversation turn the fact was learned from, when the learner named it."""
    session = fact.metadata.get("session")
    if not fact.source_conversation or not session:
        return None
    who = owner_of(request.query_params)
    client = await memory(request).conversations(who.where)
    conversation = await client.get(who.scope(fact.source_conversation))
    if conversation is None:
        return None
    return next((t for t in conversation.turns if t.turn_id == session), None)


async def fact_page(request: Request) -> Response:
    q = request.query_params
    who, fact_id = owner_of(q), param(q, "id")
    client = await memory(request).facts(who.where)
    found, _ = await client.get(who.scope(), [fact_id]) if fact_id else ([], [])
    if not found:
        raise HTTPException(404, "no such fact for this user")
    fact = found[0]
    chain = await client.history(who.scope(), fact.id)
    return render(
        request,
        "fact.html",
        owner=who,
        fact=fact,
        chain=[f for f in chain if f.id != fact.id],
        turn=await _source_turn(request, fact),
    )


def _number(form: dict[str, str], name: str, low: float, high: float) -> float | None:
    raw = form.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number", type="invalid") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must lie between {low:g} and {high:g}", type="invalid")
    return value


async def edit_fact(request: Request) -> Response:
    form = {k: v for k, v in (await mutation(request)).items() if isinstance(v, str)}
    who, fact_id = owner_of(form), param(form, "id")
    content = form.get("content", "").strip()
    if not content:
        raise BadRequest("a fact's content cannot be empty", type="invalid")
    days = _number(form, "expires_in_days", 0.001, 36500)
    change = FactInput(
        content=content,
        importance=_number(form, "importance", 0.0, 1.0),
        ttl_seconds=None if days is None else days * 86400,
    )
    backend = memory(request)
    stored = await (await backend.facts(who.where)).update(who.scope(), fact_id, change)
    await backend.audited(
        who.where, "update-fact", collection=who.collection, user=who.user, counts={"updated": 1}
    )
    return back("/fact", who, id=stored.id or fact_id)


async def delete_facts(request: Request) -> Response:
    form = await mutation(request)
    who = owner_of(form)
    ids = [i for i in form.getlist("id") if isinstance(i, str) and i]
    backend = memory(request)
    deleted = await (await backend.facts(who.where)).delete(who.scope(), ids) if ids else 0
    await backend.audited(
        who.where, "delete-facts", collection=who.collection, user=who.user,
        counts={"deleted": deleted},
    )  # fmt: skip
    return back("/facts", who, deleted=deleted)


ROUTES = [
    Route("/facts", facts_page),
    Route("/fact", fact_page),
    Route("/fact/edit", edit_fact, methods=["POST"]),
    Route("/facts/delete", delete_facts, methods=["POST"]),
]
