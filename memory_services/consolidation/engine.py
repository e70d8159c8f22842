"""A consolidation pass over one scope, its replay under redelivery, and its undo.

The caller serialises passes with the service's other writes. Order of a pass: count the
preserved memories, read the candidates (below the importance threshold, live), cluster
them, plan every change, write the plan to the ledger as ``pending``, apply it record by
record, mark it ``applied``. Every record write is guarded by the lineage it leaves behind
(the survivor lists the pass in ``consolidations``, an absorbed record names it in
``consolidation_id``), so finishing a pending pass, or undoing a half-applied one, never
applies a change twice. Undo is last-in first-out per survivor: a pass whose survivor a
later pass merged again is refused until that later pass is undone.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memory_services.consolidation.cluster import star_clusters
from memory_services.consolidation.ledger import ConsolidationLedger, Entry
from memory_services.store.base import AllOwners, Condition, Record, Scope, VectorStore
from react_mem.errors import BadRequest
from react_mem.schema.consolidation import ConsolidationCluster, ConsolidationReport

#: Seed 002's consolidation defaults: never change memories at or above 0.8 importance,
#: merge only those below 0.5 (docs/ace.md).
IMPORTANCE_THRESHOLD, MIN_IMPORTANCE = 0.8, 0.5
MAX_ID_CHARS = 256
_PAGE = 512
#: Lineage keys: on a survivor, the absorbed ids and the passes (oldest first); on an
#: absorbed record, its survivor and the pass that absorbed it.
FROM, PASSES, INTO, PASS = (
    "consolidated_from",
    "consolidations",
    "consolidated_into",
    "consolidation_id",
)


@dataclass(frozen=True, kw_only=True)
class Options:
    similarity_threshold: float
    #: Memories at or above it are never changed (seed 002's ``importance_threshold``).
    importance_threshold: float
    #: Only memories below it are merged into another (seed 002's ``min_importance``);
    #: those between it and ``importance_threshold`` may take others in, never be taken.
    #: None: ``importance_threshold``.
    min_importance: float | None = None
    #: Candidates read per pass at most (seed 002 §7.2: consolidate in batches).
    max_candidates: int
    dry_run: bool = False
    #: False (scheduled passes): a pass that merges nothing leaves no ledger entry.
    record_empty: bool = True


class Kind(Protocol):
    """What one memory kind decides; payloads are the store's."""

    name: str
    #: The payload number compared with the importance threshold.
    importance_key: str

    def live(self, now: float) -> list[Condition]:
        """Records a pass may read: current ones, not history or expired."""

    def held(self, payload: Mapping[str, Any], now: float) -> bool:
        """Whether a stored record still counts (not expired)."""

    def group(self, payload: Mapping[str, Any]) -> Hashable:
        """Only records of one group may merge (e.g. one user's)."""

    def rank(self, record: Record) -> tuple[Any, ...]:
        """Higher is better: the best member of a cluster survives."""

    def may_merge(self, survivor: Mapping[str, Any], member: Mapping[str, Any]) -> bool:
        """Whether ``member`` may merge into ``survivor`` (their vectors are alike): a guard
        against similar texts that state different things."""

    def size(self, payload: Mapping[str, Any]) -> int:
        """Bytes the record adds to the live memory."""

    def merge(
        self, survivor: Mapping[str, Any], absorbed: Sequence[Mapping[str, Any]], now: float
    ) -> dict[str, Any]:
        """The survivor's changed fields."""

    def absorb(self, payload: Mapping[str, Any], survivor_id: str, now: float) -> dict[str, Any]:
        """An absorbed record's changed fields (it must stop being live)."""

    def restore(
        self, current: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The fields that undo ``before`` -> ``after`` on a record now holding ``current``."""


def undo_fields(
    current: Mapping[str, Any],
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    counters: Sequence[str] = (),
) -> dict[str, Any]:
    """Counters lose what the merge added; any other field goes back to its old value unless
    something changed it since the merge (then the later value stays)."""
    undone: dict[str, Any] = {}
    for key, merged in after.items():
        if key in counters:
            undone[key] = max(0, int(current.get(key) or 0) - (int(merged) - int(before[key])))
        elif current.get(key) == merged:
            undone[key] = before.get(key)
    return undone


def check_id(consolidation_id: str | None, operation: str) -> str:
    if consolidation_id is None or not consolidation_id.strip():
        raise BadRequest(f"{operation} needs 'consolidation_id'")
    if len(consolidation_id) > MAX_ID_CHARS:
        raise BadRequest(f"consolidation_id is limited to {MAX_ID_CHARS} characters")
    return consolidation_id


@dataclass(frozen=True)
class Engine:
    store: VectorStore
    collection: str
    ledger: ConsolidationLedger
    kind: Kind

    async def consolidate(
        self, scope: Scope, consolidation_id: str, options: Options, now: float
    ) -> tuple[ConsolidationReport, bool]:
        """Run (or replay) pass ``consolidation_id`` over ``scope``; return its report and
        whether this call applied it (False: a dry run, a replay, or nothing to merge)."""
        owner = _owner(scope)
        entry = await self.ledger.get(owner, consolidation_id)
        if entry is not None:
            if entry.state != "pending":
                return entry.report, False
            await self._apply(owner, consolidation_id, entry.plan)
            return await self._settle(owner, entry, "applied", now), True
        plan, report = await self._survey(scope, consolidation_id, options, now)
        if options.dry_run or (not plan and not options.record_empty):
            return report, False
        entry = Entry(consolidation_id, "pending", report, plan)
        await self.ledger.put(owner, entry, now)
        await self._apply(owner, consolidation_id, plan)
        return await self._settle(owner, entry, "applied", now), bool(plan)

    async def unconsolidate(
        self, scope: Scope, consolidation_id: str, now: float
    ) -> tuple[ConsolidationReport, bool]:
        """Undo pass ``consolidation_id``; return the report and whether this call undid it."""
        owner = _owner(scope)
        entry = await self.ledger.get(owner, consolidation_id)
        if entry is None:
            raise BadRequest(
                f"no consolidation {consolidation_id!r} in this collection (and user)",
                type="not-found",
            )
        if entry.state == "undone":
            return entry.report, False
        held = await self._records(owner, _ids(entry.plan))
        for step in entry.plan:  # every check before the first write
            survivor = held.get(step["into"])
            if survivor is not None:
                _check_last(survivor.payload, step["into"], consolidation_id)
        restored = 0
        for step in entry.plan:
            restored += await self._undo(owner, consolidation_id, step, held, now)
        entry.report = entry.report.model_copy(update={"restored": restored})
        return await self._settle(owner, entry, "undone", now), True

    # -- planning ------------------------------------------------------------------
    async def _survey(
        self, scope: Scope, pass_id: str, options: Options, now: float
    ) -> tuple[list[dict[str, Any]], ConsolidationReport]:
        """The pass's plan (one step per cluster) and its report; nothing is written."""
        kind, t = self.kind, options.importance_threshold
        live = kind.live(now)
        preserved = await self._count(scope, [*live, Condition(kind.importance_key, gte=t)])
        records, complete = await self._candidates(scope, live, options)
        best_first = sorted(
            range(len(records)), key=lambda i: (kind.rank(records[i]), records[i].id), reverse=True
        )
        lowest = options.importance_threshold
        if options.min_importance is not None:
            lowest = min(options.min_importance, lowest)

        def absorbable(i: int, j: int) -> bool:
            member = records[j].payload
            low = float(member.get(kind.importance_key) or 0.0) < lowest
            return low and kind.may_merge(records[i].payload, member)

        found = star_clusters(
            [r.vector or () for r in records],
            best_first,
            [kind.group(r.payload) for r in records],
            options.similarity_threshold,
            absorbable,
        )
        plan, clusters, saved = [], [], 0
        for cluster in found:
            survivor = records[cluster.survivor]
            absorbed = [records[i] for i, _ in cluster.members]
            step, bytes_saved = self._plan(survivor, absorbed, now)
            step["similarity"] = min(s for _, s in cluster.members)
            plan.append(step)
            saved += bytes_saved
            clusters.append(
                ConsolidationCluster(
                    into=survivor.id,
                    absorbed=[r.id for r in absorbed],
                    similarity=round(step["similarity"], 6),
                )
            )
        report = ConsolidationReport(
            consolidation_id=pass_id,
            state="planned" if options.dry_run else "applied",
            dry_run=options.dry_run,
            similarity_threshold=options.similarity_threshold,
            importance_threshold=t,
            min_importance=lowest,
            candidates=len(records),
            preserved=preserved,
            merged=sum(len(c.absorbed) for c in clusters),
            clusters=clusters,
            bytes_saved=saved,
            complete=complete,
        )
        return plan, report

    def _plan(
        self, survivor: Record, absorbed: list[Record], now: float
    ) -> tuple[dict[str, Any], int]:
        kind = self.kind
        merged = kind.merge(survivor.payload, [r.payload for r in absorbed], now)
        before = {survivor.id: _pick(survivor.payload, merged)}
        after = {survivor.id: merged}
        for record in absorbed:
            changes = kind.absorb(record.payload, survivor.id, now)
            before[record.id] = _pick(record.payload, changes)
            after[record.id] = changes
        was = sum(kind.size(r.payload) for r in (survivor, *absorbed))
        saved = was - kind.size({**survivor.payload, **merged})
        step = {
            "into": survivor.id,
            "absorbed": [r.id for r in absorbed],
            "before": before,
            "after": after,
        }
        return step, saved

    async def owners(self, everyone: AllOwners, options: Options, now: float) -> list[Scope]:
        """The owners in a collection that hold candidates of a pass (a scheduled pass then
        runs once per owner, so its ledger entries and writes stay inside each owner)."""
        where = [
            *self.kind.live(now),
            Condition(self.kind.importance_key, lt=options.importance_threshold),
        ]
        found: dict[Scope, None] = {}
        offset: str | None = None
        while True:
            page, offset = await self.store.scroll(
                self.collection, scope=everyone, where=where, limit=_PAGE, offset=offset
            )
            found.update((Scope.of_payload(r.payload).owner(), None) for r in page)
            if offset is None:
                return list(found)

    async def _candidates(
        self, scope: Scope, live: list[Condition], options: Options
    ) -> tuple[list[Record], bool]:
        where = [*live, Condition(self.kind.importance_key, lt=options.importance_threshold)]
        records: list[Record] = []
        offset: str | None = None
        while True:
            limit = min(_PAGE, options.max_candidates - len(records))
            page, offset = await self.store.scroll(
                self.collection, scope=scope, where=where, limit=limit, offset=offset
            )
            records.extend(page)
            if offset is None:
                return records, True
            if len(records) >= options.max_candidates:
                return records, False

    # -- writing -------------------------------------------------------------------
    async def _apply(self, owner: Scope, pass_id: str, plan: list[dict[str, Any]]) -> None:
        held = await self._records(owner, _ids(plan))
        for step in plan:
            into, absorbed = step["into"], step["absorbed"]
            survivor = held.get(into)
            if survivor is not None and pass_id not in (survivor.payload.get(PASSES) or []):
                lineage = {
                    FROM: [*(survivor.payload.get(FROM) or []), *absorbed],
                    PASSES: [*(survivor.payload.get(PASSES) or []), pass_id],
                }
                await self._set([into], step["after"][into] | lineage, owner)
            batches: dict[str, list[str]] = defaultdict(list)
            for id in absorbed:
                record = held.get(id)
                if record is not None and record.payload.get(PASS) != pass_id:
                    changes = step["after"][id] | {INTO: into, PASS: pass_id}
                    batches[json.dumps(changes, sort_keys=True)].append(id)
            for changes, ids in batches.items():
                await self._set(ids, json.loads(changes), owner)

    async def _undo(
        self, owner: Scope, pass_id: str, step: dict[str, Any], held: dict[str, Record], now: float
    ) -> int:
        into, absorbed = step["into"], step["absorbed"]
        before, after = step["before"], step["after"]
        survivor = held.get(into)
        if survivor is not None and pass_id in (p := survivor.payload.get(PASSES) or []):
            lineage = {
                FROM: [i for i in survivor.payload.get(FROM) or [] if i not in set(absorbed)],
                PASSES: [x for x in p if x != pass_id],
            }
            changes = self.kind.restore(survivor.payload, before[into], after[into])
            await self._set([into], changes | lineage, owner)
        restored = 0
        for id in absorbed:
            record = held.get(id)
            if record is None or record.payload.get(PASS) != pass_id:
                continue
            changes = self.kind.restore(record.payload, before[id], after[id])
            await self._set([id], changes | {INTO: None, PASS: None}, owner)
            restored += self.kind.held({**record.payload, **changes}, now)
        return restored

    async def _settle(
        self, owner: Scope, entry: Entry, state: str, now: float
    ) -> ConsolidationReport:
        entry.state = state
        entry.report = entry.report.model_copy(update={"state": state})
        await self.ledger.put(owner, entry, now)
        return entry.report

    # -- store access --------------------------------------------------------------
    async def _count(self, scope: Scope, where: list[Condition]) -> int:
        return await self.store.count(self.collection, scope=scope, where=where)

    async def _records(self, scope: Scope, ids: list[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        for start in range(0, len(ids), _PAGE):
            chunk = ids[start : start + _PAGE]
            for record in await self.store.get(self.collection, chunk, scope=scope):
                found[record.id] = record
        return found

    async def _set(self, ids: list[str], payload: dict[str, Any], scope: Scope) -> None:
        await self.store.set_payload(self.collection, ids, payload, scope=scope)


def _owner(scope: Scope) -> Scope:
    """Where a pass's ledger entry lives, and the scope its writes are confined to: the
    request's workspace, collection and user (a conversation only narrows what is read)."""
    return scope.owner()


def _ids(plan: list[dict[str, Any]]) -> list[str]:
    return [id for step in plan for id in (step["into"], *step["absorbed"])]


def _pick(payload: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    return {key: payload.get(key) for key in changes}


def _check_last(payload: Mapping[str, Any], id: str, pass_id: str) -> None:
    passes = payload.get(PASSES) or []
    if pass_id not in passes:
        return  # already undone (a redelivery finishing the undo)
    later = payload.get(PASS) if payload.get(INTO) else passes[-1]
    if later != pass_id:
        raise BadRequest(
            f"memory {id} was consolidated again by {later!r}; unconsolidate that first",
            type="conflict",
        )
