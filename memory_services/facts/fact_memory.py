"""The fact-memory operations over a vector store and an embedder (no bus in here)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_services import when
from memory_services.backfill import fill_missing
from memory_services.consolidation.engine import Engine, Options, check_id
from memory_services.consolidation.ledger import ConsolidationLedger
from memory_services.facts import asof, changes, ingest, ranked, slots, supersede
from memory_services.facts import records as rec
from memory_services.facts.access_overlay import AccessOverlay, owner_of
from memory_services.facts.access_stats import AccessLog
from memory_services.facts.access_table import AccessTable
from memory_services.facts.consolidate import FactKind
from memory_services.facts.context import Clock, FactContext, fact_ids, query_vector
from memory_services.forget import forget
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    CollectionSpec,
    Condition,
    Retrieval,
    Scope,
    StoreScope,
    VectorStore,
)
from react_mem.embedding.base import Embedder
from react_mem.errors import BadRequest
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.facts import Fact, FactInput, FactRequest, StoredFact
from react_mem.schema.forget import Forgotten

#: Days a fact may be told after it happened, for a question's time range (tuned on LoCoMo dev).
TOLD = 30 * when.DAY

logger = logging.getLogger(__name__)


class FactMemory:
    """Writes are serialised (checks, then writes, never interleaved); reads run freely.

    Retrieval's access statistics go to a side table (``access_path``; None: in memory),
    not into the indexed records, and are laid over them wherever facts are read
    (:mod:`.access`, :mod:`.access_overlay`): everything here reads and writes the store
    through that overlay. Call :meth:`close` when done (it writes what is pending).
    """

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        policy: rec.FactPolicy,
        clock: Clock,
        on_change: Callable[[int], None] = lambda delta: None,
        access_delay: float = 1.0,
        access_path: Path | None = None,
        workspace_ttl: Callable[[str], float | None] | None = None,
    ) -> None:
        collection = f"facts-{embedder.dimension}"
        self._access = AccessLog(AccessTable(access_path), delay=access_delay)
        #: Each owner's sort keys for ``sorted`` (:mod:`.ranked`), dropped on their writes.
        self.sort_keys = ranked.SortKeys()
        overlay = AccessOverlay(store, collection, self._access, on_write=self.sort_keys.changed)
        self.ctx = FactContext(
            store=overlay,
            embedder=embedder,
            scopes=ScopeRegistry(store, "fact-scopes-1"),
            policy=policy,
            clock=clock,
            collection=collection,
            on_change=on_change,
            workspace_ttl=workspace_ttl,
        )
        self._write_lock = asyncio.Lock()
        #: Facts stored before the ``tells_time`` flag or the ``slot`` key get them in the
        #: first sweep.
        self._flags_filled = False
        kind = FactKind(
            max_metadata_chars=policy.max_content_chars,
            history_ttl=policy.consolidation_history_ttl,
        )
        ledger = ConsolidationLedger(store, f"fact-consolidations-{embedder.dimension}")
        self._consolidation = Engine(overlay, collection, ledger, kind)

    async def ensure(self) -> None:
        """Create the collections if absent and open the side table (the store must be
        open)."""
        await self._access.table.open()
        ctx = self.ctx
        text = ("content", "context")  # what lexical search reads
        spec = CollectionSpec(ctx.collection, ctx.embedder.dimension, rec.INDEXES, text_fields=text)
        await self.ctx.store.ensure(spec)
        await self.ctx.scopes.ensure()
        await self._consolidation.ledger.ensure()

    @property
    def access(self) -> AccessLog:
        """Retrieval's access statistics (the side table and what is pending)."""
        return self._access

    async def flush_access(self) -> None:
        """Write the access statistics retrievals left pending to the side table (reads
        see them before as well)."""
        await self._access.flush()

    async def close(self) -> None:
        """Write what is pending and close the side table; the store stays open."""
        await self._access.close()
        await self._access.table.close()

    # -- writes ------------------------------------------------------------------
    def check_sizes(self, request: FactRequest) -> None:
        """Refuse a write over the service's count or size limits (cheap: no text is
        read beyond its length), before anything reads the texts themselves."""
        if request.operation == "store":
            ingest.check_sizes(self.ctx, request.facts)
        elif request.operation == "update" and request.fact is not None:
            self.ctx.content(request.fact.content, "fact.content")
            self.ctx.metadata(request.fact.metadata, "fact.metadata")

    async def store(
        self,
        scope: Scope,
        facts: list[FactInput],
        request_id: str | None = None,
        *,
        evict: bool = False,
        sequence: bool = False,
    ) -> tuple[list[StoredFact], list[str]]:
        """Add facts, or reinforce the existing ones they repeat; see :mod:`.ingest`. Return
        what became of each, and the ids evicted to make room (``evict``; see :mod:`.quota`).
        ``sequence``: the facts are consecutive turns, in order (neighbours in search)."""
        prepared = await ingest.prepare(self.ctx, scope, facts)  # outside the lock
        async with self._write_lock:
            return await ingest.store(
                self.ctx, scope, prepared, request_id, evict=evict, sequence=sequence
            )

    async def update(
        self, scope: Scope, id: str | None, fact: FactInput | None, request_id: str | None = None
    ) -> StoredFact:
        """Supersede fact ``id`` with ``fact``; see :mod:`.supersede`."""
        if id is None or fact is None:
            raise BadRequest("update needs 'fact_id' and the new 'fact'")
        [id] = fact_ids([id], 1, "fact_id")
        async with self._write_lock:
            return await supersede.update(self.ctx, scope, id, fact, request_id)

    async def delete(self, scope: Scope, ids: Sequence[str]) -> int:
        ids = fact_ids(ids, self.ctx.policy.max_list_limit)
        if not ids:
            raise BadRequest("delete needs 'ids'")
        return await self._delete(scope, ids=ids)

    async def purge(self, scope: Scope) -> int:
        """Delete every fact in ``scope``: a collection, one user's or one conversation's
        (and, but for a conversation's, the consolidation passes recorded there)."""
        removed = await self._delete(scope)
        await self._consolidation.ledger.purge(scope)
        return removed

    async def forget(self, workspace: str, collection: str, user: str | None) -> Forgotten:
        """Every record of ``user`` (facts with their history and consolidation passes) in
        ``collection`` or (``""``) every collection, with no bytes left on disk."""

        async def purge(scope: Scope) -> dict[str, int]:
            facts = await self._delete(scope)
            return {"facts": facts, "consolidations": await self._consolidation.ledger.purge(scope)}

        return await forget(
            self.ctx.store,
            self.ctx.scopes,
            workspace=workspace,
            collection=collection,
            user=user,
            purge=purge,
            collections=[self.ctx.collection, self._consolidation.ledger.collection],
        )

    async def sweep(self) -> tuple[int, int]:
        """Delete expired facts in every scope that ever held facts; return how many were
        removed and how many fact records remain."""
        await self._access.flush()
        await self._access.table.checkpoint()  # its fsyncs, in a worker thread
        expired = [Condition(key="expires_at", lte=self.ctx.clock())]
        removed = held = 0
        scopes = await self.ctx.scopes.scopes()
        for scope in scopes:
            removed += await self._delete(scope, where=expired)
            held += await self.ctx.count(scope, ())
        if not self._flags_filled:
            filled = await fill_missing(
                self.ctx.store,
                self.ctx.collection,
                scopes,
                "tells_time",
                lambda payload: when.tells_time(str(payload.get("content", ""))),
            )
            slotted = await fill_missing(
                self.ctx.store,
                self.ctx.collection,
                scopes,
                "slot",
                lambda payload: changes.slot_of(str(payload.get("content", "")))["slot"],
            )
            # Facts older rules could not read: read again by these.
            slotted += await fill_missing(
                self.ctx.store,
                self.ctx.collection,
                scopes,
                "slot_rules",
                lambda payload: tuple(sorted(changes.reread(payload).items())),
                where=[changes.UNREAD],
                fields=lambda value: dict(value),
            )
            # Facts an older version of the rules read: read again by this one.
            slotted += await changes.reread_older(self.ctx.store, self.ctx.collection, scopes)
            self._flags_filled = True
            if filled:
                logger.info("facts: %d stored before the tells_time flag now have it", filled)
            if slotted:
                logger.info("facts: %d stored before slots now have their slot key", slotted)
        return removed, held

    async def _delete(
        self,
        scope: StoreScope,
        *,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        async with self._write_lock:
            removed = await self.ctx.delete(scope, ids=ids, where=where)
        self.ctx.on_change(-removed)
        return removed

    # -- consolidation -------------------------------------------------------------
    async def consolidate(
        self,
        scope: Scope,
        consolidation_id: str | None,
        *,
        similarity_threshold: float | None = None,
        importance_threshold: float | None = None,
        min_importance: float | None = None,
        dry_run: bool = False,
    ) -> tuple[ConsolidationReport, bool]:
        """Merge near-duplicate low-importance facts (see :mod:`.consolidate`); return the
        report and whether this call changed anything."""
        policy = self.ctx.policy
        options = Options(
            similarity_threshold=(
                policy.consolidation_similarity
                if similarity_threshold is None
                else similarity_threshold
            ),
            importance_threshold=(
                policy.consolidation_importance
                if importance_threshold is None
                else importance_threshold
            ),
            min_importance=(
                policy.consolidation_min_importance if min_importance is None else min_importance
            ),
            max_candidates=policy.consolidation_max_candidates,
            dry_run=dry_run,
        )
        pass_id = check_id(consolidation_id, "consolidate")
        async with self._write_lock:
            return await self._consolidation.consolidate(scope, pass_id, options, self.ctx.clock())

    async def unconsolidate(
        self, scope: Scope, consolidation_id: str | None
    ) -> tuple[ConsolidationReport, bool]:
        pass_id = check_id(consolidation_id, "unconsolidate")
        async with self._write_lock:
            return await self._consolidation.unconsolidate(scope, pass_id, self.ctx.clock())

    async def consolidate_all(self, consolidation_id: str) -> list[ConsolidationReport]:
        """A scheduled pass over every owner of every collection that holds facts, with the
        default thresholds; owners with nothing to merge leave no ledger entry."""
        policy, reports = self.ctx.policy, []
        options = Options(
            similarity_threshold=policy.consolidation_similarity,
            importance_threshold=policy.consolidation_importance,
            min_importance=policy.consolidation_min_importance,
            max_candidates=policy.consolidation_max_candidates,
            record_empty=False,
        )
        engine = self._consolidation
        for everyone in await self.ctx.scopes.scopes():
            for owner in await engine.owners(everyone, options, self.ctx.clock()):
                async with self._write_lock:
                    report, _ = await engine.consolidate(
                        owner, consolidation_id, options, self.ctx.clock()
                    )
                reports.append(report)
        return reports

    # -- reads -------------------------------------------------------------------
    async def retrieve(
        self,
        scope: Scope,
        *,
        query: str | None = None,
        vector: Sequence[float] | None = None,
        top_k: int = 5,
        min_score: float | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        time_boost: bool = True,
    ) -> list[Fact]:
        """The current facts most similar to ``query`` (embedded once, unless its embedding
        comes as ``vector``), ranked as ``retrieval`` says (hybrid by default; by ``vector``
        alone: dense), best first; each one's ``last_accessed`` and ``access_count`` are
        updated (in the side table, see :mod:`.access`). With ``time_boost``, a hybrid
        search ranks the facts whose ``valid_at`` falls in a time the query names higher,
        or, when it asks when ("when did ..."), the facts that tell a time (see
        :mod:`memory_services.when`); a question about a slot the rules read ("where do I
        live?", :func:`.slots.asked`) ranks the facts filling it higher instead; and when
        it asks about the past, the earlier values that held then too (:mod:`.asof`)."""
        ctx = self.ctx
        if query is None and vector is None:
            raise BadRequest("retrieve needs 'query' or 'vector' (or both)")
        if top_k > ctx.policy.max_top_k:
            raise BadRequest(f"top_k is {top_k}; at most {ctx.policy.max_top_k}")
        if vector is not None:
            probe = query_vector(vector, ctx.embedder.dimension)
            if query is not None:  # beside a vector: the words hybrid ranking reads
                query = query[: ctx.policy.max_content_chars] if query.strip() else None
        else:
            assert query is not None
            [probe] = await ctx.embed([ctx.content(query, "query")])
        now = ctx.clock()
        boost: list[Condition] = []
        key = None if query is None else slots.asked(query)
        # The time the query names, read once (the boost and the past both need it).
        named = None if query is None or not time_boost else when.parse(query, now)
        if key is not None:  # "where do I live?": the facts filling that slot
            boost = [Condition("slot", equals=key)]
        elif named is not None:  # that time, and a while after it (when it was told)
            boost = [Condition("valid_at", gte=named[0], lt=named[1] + TOLD)]
        elif query is not None and time_boost and when.asks_when(query):
            boost = [Condition("tells_time", equals=True)]  # "when did ...": facts telling one
        hits = await ctx.search(
            scope,
            probe,
            limit=top_k,
            min_score=min_score,
            where=rec.live(now),
            text=query,
            retrieval=retrieval,
            boost=boost,
            leave_out=rec.UNRANKED,
        )
        past = None if query is None or not time_boost else asof.asked(query, named, now)
        if key is not None:  # the facts filling the asked slot are its answer: first; about
            # the present, the latest first (two pets are both current: "now" is the newer)
            hits = sorted(hits, key=lambda hit: _slot_order(hit.payload, key, past is None))
        facts, owners = [], set()
        for hit in hits:
            owner = owner_of(hit.payload)
            owners.add(owner)
            seen = self._access.seen(owner, hit.id, hit.payload, now)
            facts.append(rec.to_fact(hit.id, {**hit.payload, **seen}, hit.score))
        for owner in owners:  # their access counts moved
            self.sort_keys.changed(owner)
        if query is not None and past:
            earlier = await ctx.search(
                scope,
                probe,
                limit=top_k,
                min_score=min_score,
                where=[*asof.history_filter(past, key), *rec.unexpired(now)],
                text=query,
                retrieval=retrieval,
                leave_out=rec.UNRANKED,
            )
            if earlier:  # what held then; superseded versions keep their access counts
                by_id = {f.id: f for f in facts}
                order = asof.merge(hits, earlier, past, top_k, key)
                facts = [by_id.get(h.id) or rec.to_fact(h.id, h.payload, h.score) for h in order]
        return facts

    async def get(self, scope: Scope, ids: Sequence[str]) -> tuple[list[Fact], list[str]]:
        """Facts by id, superseded versions included; and the ids not found."""
        ids = fact_ids(ids, self.ctx.policy.max_list_limit)
        now = self.ctx.clock()
        found = {
            r.id: r for r in await self.ctx.get(ids, scope) if float(r.payload["expires_at"]) > now
        }
        facts = [rec.to_fact(i, found[i].payload) for i in dict.fromkeys(ids) if i in found]
        return facts, [i for i in ids if i not in found]

    async def history(self, scope: Scope, id: str | None) -> list[Fact]:
        """Every version of fact ``id``, oldest first."""
        if id is None:
            raise BadRequest("history needs 'fact_id'")
        [id] = fact_ids([id], 1, "fact_id")
        return await supersede.history(self.ctx, scope, id)

    async def page(
        self, scope: Scope, *, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[Fact], str | None]:
        """A page of current facts in id order, and the cursor of the next page."""
        ctx = self.ctx
        if limit > ctx.policy.max_list_limit:
            raise BadRequest(f"limit is {limit}; at most {ctx.policy.max_list_limit}")
        if cursor is not None:
            [cursor] = fact_ids([cursor], 1, "cursor")
        page, next_cursor = await ctx.scroll(scope, rec.live(ctx.clock()), limit, cursor)
        return [rec.to_fact(r.id, r.payload) for r in page], next_cursor


def _slot_order(payload: Mapping[str, Any], key: str, latest: bool) -> tuple[bool, float]:
    """Facts of slot ``key`` first (with ``latest``, the one valid latest first); the others
    as ranked."""
    filling = payload.get("slot") == key
    return (not filling, -changes.when(payload) if filling and latest else 0.0)
