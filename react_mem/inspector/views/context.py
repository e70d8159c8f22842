"""The context of one answer: which memory items and bullets its prompt held, with scores
and token counts.

The agent records them on the answer's conversation turn (``memory_used``: kind, id, score,
tokens; no contents). Their text is read here by id from the services that hold them, as the
turn's owner, so an item deleted or forgotten since shows as gone, never as a copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from react_mem.clients.playbook import PlaybookRef
from react_mem.inspector.views.common import Owner, memory, owner_of, param, render
from react_mem.schema.agent import MemoryRef
from react_mem.schema.conversations import Conversation, ConversationTurn

#: Conversations searched for a session when the page does not name its conversation.
SEARCHED = 50


@dataclass(frozen=True, slots=True)
class Used:
    ref: MemoryRef
    #: The item's text as its service holds it now; None: deleted since.
    text: str | None


async def _find(
    request: Request, who: Owner, session: str, conversation: str
) -> tuple[Conversation, ConversationTurn] | None:
    client = await memory(request).conversations(who.where)
    if conversation:
        candidates = [conversation]
    else:  # the owner's most recent conversations
        page = await client.page(who.scope(), limit=SEARCHED)
        candidates = [c.conversation_id for c in page.items]
    for cid in candidates:
        found = await client.get(who.scope(cid))
        if found is None:
            continue
        turn = next((t for t in found.turns if session in (t.session_id, t.turn_id)), None)
        if turn is not None:
            return found, turn
    return None


async def _texts(
    request: Request, who: Owner, refs: list[MemoryRef], conversation: Conversation
) -> dict[tuple[str, str], str]:
    """Each item's current text, by (kind, id), read from its service as ``who``."""
    backend, texts = memory(request), dict[tuple[str, str], str]()
    ids = {kind: [r.id for r in refs if r.kind == kind] for kind in ("fact", "episode", "bullet")}
    if ids["fact"]:
        facts, _ = await (await backend.facts(who.where)).get(who.scope(), ids["fact"])
        texts |= {("fact", f.id): f.content for f in facts}
    if ids["episode"]:
        episodes = await (await backend.episodes(who.where)).get(who.scope(), ids["episode"])
        texts |= {("episode", e.id): e.goal for e in episodes}
    if ids["bullet"]:
        book = PlaybookRef(collection=who.collection, user=who.user or None)
        bullets = await (await backend.playbook(who.where)).get(book, ids["bullet"])
        texts |= {("bullet", b.id): b.content for b in bullets}
    for turn in conversation.turns:
        texts[("turn", turn.turn_id)] = turn.summary or f"{turn.query} → {turn.answer}"
    if conversation.summary:
        texts[("summary", conversation.conversation_id)] = conversation.summary
    return texts


async def context_page(request: Request) -> Response:
    q = request.query_params
    who, session = owner_of(q), param(q, "session")
    if not session:
        return render(request, "context.html", owner=who, session="", turn=None, used=[])
    found = await _find(request, who, session, param(q, "conversation"))
    if found is None:
        raise HTTPException(404, "no answer with this session id for this user")
    conversation, turn = found
    texts = await _texts(request, who, turn.memory_used, conversation)
    used = [Used(r, texts.get((r.kind, r.id))) for r in turn.memory_used]
    return render(
        request,
        "context.html",
        owner=who,
        session=session,
        conversation=conversation,
        turn=turn,
        used=used,
        tokens=sum(r.tokens or 0 for r in turn.memory_used),
    )


ROUTES = [Route("/context", context_page)]
