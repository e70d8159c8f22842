"""Conversation records over a vector store and an embedder (no locking, no events: the
caller serialises the writes of one conversation, see :mod:`.lifecycle`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_services import when
from memory_services.backfill import fill_missing
from memory_services.conversations.records import (
    IS_HEADER,
    IS_TURN,
    ConversationLimits,
    header_id,
    new_header,
    notices_taken,
    placeholder_vector,
    to_turn,
    turn_payload,
    turn_record_id,
    turn_text,
)
from memory_services.forget import forget
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    CollectionSpec,
    Condition,
    FieldType,
    Record,
    Retrieval,
    Scope,
    StoreScope,
    VectorStore,
)
from react_mem.embedding.base import Embedder
from react_mem.embedding.priority import lowered
from react_mem.errors import BadRequest
from react_mem.schema.conversations import ConversationRequest, ConversationTurn
from react_mem.schema.forget import Forgotten

Payload = dict[str, Any]


@dataclass
class EarlyVector:
    """A turn's text being embedded while its request is screened for PII (two threads,
    side by side): the append uses it when the screen left the text as it was."""

    text: str
    vector: asyncio.Future[list[list[float]]] = field(repr=False)

    def discard(self) -> None:
        """Stop it, or take its outcome, so an unused one leaves nothing behind."""
        if not self.vector.done():
            self.vector.cancel()
        elif not self.vector.cancelled():
            with contextlib.suppress(Exception):
                self.vector.exception()


class ConversationMemory:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        collection: str,
        registry: ScopeRegistry,
        limits: ConversationLimits,
        clock: Callable[[], float],
    ) -> None:
        self._store, self._embedder = store, embedder
        self.collection = collection
        self.registry = registry
        self.limits = limits
        self._clock = clock
        #: Turns stored before the ``tells_time`` flag get it in the first sweep.
        self._flags_filled = False

    async def fill_flags(self) -> int:
        """Give the turns stored before the ``tells_time`` flag theirs, once per process;
        return how many were filled."""
        if self._flags_filled:
            return 0
        filled = await fill_missing(
            self._store,
            self.collection,
            await self.registry.scopes(),
            "tells_time",
            lambda payload: when.tells_time(turn_text(payload)),
            where=[IS_TURN],
        )
        self._flags_filled = True
        return filled

    async def ensure(self) -> None:
        spec = CollectionSpec(
            self.collection,
            vector_size=self._embedder.dimension,
            indexes={
                "kind": FieldType.KEYWORD,
                "ended": FieldType.BOOL,
                "published": FieldType.BOOL,
                "last_activity": FieldType.FLOAT,
                "ended_at": FieldType.FLOAT,
                "sequence": FieldType.INTEGER,
                "time": FieldType.FLOAT,
                "tells_time": FieldType.BOOL,
            },
            text_fields=("query", "answer"),
        )
        await self._store.ensure(spec)
        await self.registry.ensure()

    # -- headers -------------------------------------------------------------------
    async def header(self, scope: Scope) -> Payload | None:
        found = await self._store.get(self.collection, [header_id(scope)], scope=scope)
        return dict(found[0].payload) if found else None

    async def write_header(self, scope: Scope, payload: Mapping[str, Any]) -> None:
        vector = placeholder_vector(self._embedder.dimension)
        record = Record(id=header_id(scope), payload=dict(payload), vector=vector)
        await self._store.upsert(self.collection, [record])

    async def new_header(self, scope: Scope, *, flow: str) -> Payload:
        """A header for a conversation with no turn yet (registered, so forget finds it)."""
        await self.registry.remember(scope)
        return new_header(scope, now=self._clock(), flow=flow)

    async def headers(
        self, scope: StoreScope, where: Sequence[Condition], *, limit: int, offset: str | None
    ) -> tuple[list[Payload], str | None]:
        page, next_offset = await self._store.scroll(
            self.collection, scope=scope, where=[IS_HEADER, *where], limit=limit, offset=offset
        )
        return [dict(r.payload) for r in page], next_offset

    async def all_headers(self, scope: StoreScope, where: Sequence[Condition]) -> list[Payload]:
        found: list[Payload] = []
        offset: str | None = None
        while True:
            page, offset = await self.headers(scope, where, limit=256, offset=offset)
            found += page
            if offset is None:
                return found

    # -- turns ---------------------------------------------------------------------
    def embed_early(self, request: ConversationRequest) -> EarlyVector:
        """Start embedding the turn ``request`` appends, as sent (see :class:`EarlyVector`)."""
        text = f"{request.query.strip()}\n{request.answer}".strip()  # turn_text's, unstored
        with lowered():  # the answer does not wait for its turn's store
            return EarlyVector(text, asyncio.ensure_future(self._embedder.embed([text])))

    async def append(
        self,
        scope: Scope,
        request: ConversationRequest,
        *,
        key: str,
        flow: str,
        header: Payload | None,
        early: EarlyVector | None = None,
    ) -> tuple[ConversationTurn, bool]:
        """Store the turn named ``key`` after the last one; return (turn, created).
        ``early``: its text's embedding, started before the screen (used if it still holds).

        A turn already stored (a redelivery) is returned as it is, after making sure the
        header counts it (the header write may not have happened before a crash).
        """
        record_id = turn_record_id(scope, key)
        found = await self._store.get(self.collection, [record_id], scope=scope)
        now = self._clock()
        if found:
            stored = found[0].payload
            sequence = int(stored["sequence"])
            if header is None or int(header["turn_count"]) <= sequence:
                repaired = header or new_header(scope, now=now, flow=flow)
                given = list(stored.get("notices") or [])
                repaired = notices_taken(repaired, given, self.limits)
                await self.write_header(scope, repaired | {"turn_count": sequence + 1})
            return to_turn(stored), False
        sequence = int(header["turn_count"]) if header else 0
        if sequence >= self.limits.max_turns:
            raise BadRequest(
                f"append: the conversation holds {sequence} turns, the limit",
                type="quota-exceeded",
            )
        payload = turn_payload(scope, request, key=key, sequence=sequence, now=now)
        # The quota notices pending here go with this turn: its answer tells them, once.
        given = list(header.get("notices") or []) if header and request.take_notices else []
        payload["notices"] = given
        text = turn_text(payload)
        if early is not None and early.text == text:
            [vector] = await early.vector
        else:  # the screen changed it (or none was started): what is stored is embedded
            with lowered():
                [vector] = await self._embedder.embed([text])
        await self.registry.remember(scope)
        record = Record(id=record_id, payload=payload, vector=vector)
        await self._store.upsert(self.collection, [record])
        updated = notices_taken(header or new_header(scope, now=now, flow=flow), given, self.limits)
        updated |= {"turn_count": sequence + 1, "last_activity": now, "flow": flow}
        if updated["ended"]:  # a new turn reopens an ended conversation
            updated |= {
                "ended": False,
                "ended_at": None,
                "end_reason": None,
                "published": False,
                "generation": int(updated["generation"]) + 1,
            }
        await self.write_header(scope, updated)
        return to_turn(payload), True

    async def turns(self, scope: Scope, *, since: int = 0) -> list[ConversationTurn]:
        """Every turn of the conversation, in sequence order; ``since``: only those from
        that sequence number on (the last few of a long conversation, read alone)."""
        where = [IS_TURN] if since <= 0 else [IS_TURN, Condition("sequence", gte=since)]
        found: list[ConversationTurn] = []
        offset: str | None = None
        while True:
            page, offset = await self._store.scroll(
                self.collection, scope=scope, where=where, limit=256, offset=offset
            )
            found += [to_turn(r.payload) for r in page]
            if offset is None:
                return sorted(found, key=lambda t: (t.sequence, t.time, t.turn_id))

    async def search(
        self,
        scope: Scope,
        text: str,
        *,
        top_k: int,
        min_score: float | None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        window: int = 0,
    ) -> list[ConversationTurn]:
        """The ``top_k`` turns nearest ``text`` (ranked as ``retrieval`` says), best first;
        with a ``window``, each hit comes with the turns up to ``window`` either side of it in
        its conversation (in order, ``similarity`` None), so an answer spread over adjacent
        turns comes back whole. A turn appears once. A hybrid search ranks the turns of a
        time ``text`` names ("last week", "in May 2023") higher, or, when it asks when, the
        turns that tell a time ("yesterday", "on Friday")."""
        [vector] = await self._embedder.embed([text])
        named = when.span(text, self._clock(), after=when.DAY)
        boost = [] if named is None else [Condition("time", gte=named[0], lt=named[1])]
        if named is None and when.asks_when(text):
            boost = [Condition("tells_time", equals=True)]
        hits = await self._store.search(
            self.collection,
            vector,
            scope=scope,
            limit=top_k,
            min_score=min_score,
            where=[IS_TURN],
            text=text,
            retrieval=retrieval,
            boost=boost,
        )
        found = [to_turn(hit.payload, hit.score) for hit in hits]
        if window <= 0:
            return found
        hit_keys = {(t.conversation_id, t.sequence) for t in found}
        emitted: set[tuple[str, int]] = set()
        turns: list[ConversationTurn] = []
        for hit in found:
            near = await self._neighbours(scope, hit, window)
            before = [t for t in near if t.sequence < hit.sequence]
            after = [t for t in near if t.sequence > hit.sequence]
            for turn in [*before, hit, *after]:
                key = (turn.conversation_id, turn.sequence)
                if key in emitted or (turn is not hit and key in hit_keys):
                    continue  # a hit comes as itself, with its similarity
                emitted.add(key)
                turns.append(turn)
        return turns

    async def _neighbours(
        self, scope: Scope, hit: ConversationTurn, window: int
    ) -> list[ConversationTurn]:
        """The turns of ``hit``'s conversation within ``window`` of it, in order."""
        where = [
            IS_TURN,
            Condition("sequence", gte=hit.sequence - window, lte=hit.sequence + window),
        ]
        records, _ = await self._store.scroll(
            self.collection,
            scope=scope.with_conversation(hit.conversation_id),
            where=where,
            limit=2 * window + 1,
        )
        turns = [to_turn(r.payload) for r in records if r.payload.get("sequence") != hit.sequence]
        return sorted(turns, key=lambda t: t.sequence)

    # -- removal and size ------------------------------------------------------------
    async def delete(self, scope: Scope) -> int:
        """Every record (headers and turns) inside ``scope``."""
        return await self._store.delete(self.collection, scope=scope)

    async def forget(self, workspace: str, collection: str, user: str | None) -> Forgotten:
        """Every conversation of ``user`` (summaries and turns) in ``collection`` or (``""``)
        every collection, with no bytes left on disk (see :mod:`memory_services.forget`)."""

        async def purge(scope: Scope) -> dict[str, int]:
            headers, turns = await self.count(scope, IS_HEADER), await self.count(scope, IS_TURN)
            await self.delete(scope)
            return {"conversations": headers, "turns": turns}

        return await forget(
            self._store,
            self.registry,
            workspace=workspace,
            collection=collection,
            user=user,
            purge=purge,
            collections=[self.collection],
        )

    async def count(self, scope: StoreScope, kind: Condition) -> int:
        return await self._store.count(self.collection, scope=scope, where=[kind])
