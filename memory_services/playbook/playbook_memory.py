"""The playbook operations over a vector store and an embedder (no bus in here); how a
playbook is opened and committed is :mod:`.lifecycle`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np

from memory_services.playbook import deltas, refine
from memory_services.playbook.erase import Erasing
from memory_services.playbook.lifecycle import Applied
from memory_services.playbook.playbook import Playbook, Vector, as_vector
from memory_services.playbook.records import ScopeKey, expires_at, stored
from memory_services.playbook.retrieve import Parts, Query, scored
from memory_services.playbook.scoring import resolve_weights
from memory_services.playbook.versions import State
from react_mem.errors import BadRequest
from react_mem.schema.playbook import Bullet, BulletChange, Delta, DeltaRecord, Weights

__all__ = ["Applied", "PlaybookMemory"]


class PlaybookMemory(Erasing):
    """retrieve, get, list, stats, history, show, apply, rollback, delete, purge, forget
    and the TTL sweep."""

    # -- reads -------------------------------------------------------------------------
    async def retrieve(
        self,
        keys: ScopeKey | Sequence[ScopeKey],
        *,
        query: str | None,
        vector: Sequence[float] | None,
        top_k: int,
        weights: str | Weights,
        relevance: str = "embedding",
        user: str | None = None,
        topic: str | None = None,
        advance_clock: bool = True,
        advance: Sequence[ScopeKey] | None = None,
        min_relevance: float | None = None,
    ) -> tuple[list[Bullet], Playbook]:
        """The best ``top_k`` bullets of the playbooks ``keys`` together; then the clock of
        each playbook in ``advance`` (default: all) advances by one and its returned
        bullets' active access index moves to the new clock (unless ``advance_clock`` is
        false). Returns the bullets and the first playbook of ``keys`` (its version, clock).
        ``min_relevance`` (none: the policy's floor) leaves out bullets less relevant."""
        keys = list(dict.fromkeys(listed(keys)))  # a playbook named twice is read once
        advance = keys if advance is None else advance
        chosen = resolve_weights(weights)
        probe = await self._probe(query, vector, relevance)
        text = query or ""
        q = Query(
            vector=probe,
            text=text,
            top_k=top_k,
            weights=chosen,
            user=user,
            topic=topic,
            hybrid=relevance == "hybrid",
            min_relevance=min_relevance,
        )
        async with self.open_all(keys) as books:
            ranked = [
                (bullet, parts, n)
                for n, pb in enumerate(books)
                for bullet, parts in scored(pb, q, self.rates, self.policy, self.clock())
            ]
            ranked.sort(key=lambda found: (-found[1]["score"], found[0].id))
            best = ranked[:top_k]
            if advance_clock:
                moved = {n: books[n] for n, key in enumerate(keys) if key in advance}
                await self._advance(moved, best)
            # Each returned bullet as its playbook now holds it (its access index moved).
            found = [books[n].bullets[b.id].model_copy(update=parts) for b, parts, n in best]
            return found, books[0]

    async def _advance(
        self, moved: dict[int, Playbook], best: list[tuple[Bullet, Parts, int]]
    ) -> None:
        """Move each ``moved`` playbook's clock on by one, and the access indexes of its
        bullets among ``best`` to it (the caller holds their locks): the clocks in one
        write, then each playbook's bullets."""
        now = self.clock()
        found = {n: [b for b, _, at in best if at == n] for n in moved}
        try:
            await self.history.put_states(
                [
                    (pb.key, State(pb.clock + 1, pb.version, pb.generation + 1, pb.seeded))
                    for pb in moved.values()
                ]
            )
            for n, pb in moved.items():
                await self.bullets.touch(pb.key, found[n], pb.clock + 1, now)
        except BaseException:
            for pb in moved.values():
                self.forget(pb.key)
            raise
        for n, pb in moved.items():
            pb.clock, pb.generation = pb.clock + 1, pb.generation + 1
            pb.touch([b.id for b in found[n]], pb.clock, now)

    async def _probe(
        self, query: str | None, vector: Sequence[float] | None, relevance: str
    ) -> Vector | None:
        if relevance in ("jaccard", "hybrid") and (not query or not query.strip()):
            raise BadRequest(f"{relevance} relevance needs the 'query' text", type="bad-query")
        if relevance == "jaccard":
            return None
        if vector is not None:
            probe = as_vector(vector)
            if probe.shape != (self.embedder.dimension,) or not np.all(np.isfinite(probe)):
                raise BadRequest(
                    f"vector must hold {self.embedder.dimension} finite numbers", type="bad-vector"
                )
            norm = float(np.linalg.norm(probe))
            if norm == 0:
                raise BadRequest("vector must be non-zero", type="bad-vector")
            return probe / norm
        if query is None or not query.strip():
            raise BadRequest("retrieve needs 'query' or 'vector'", type="bad-query")
        if len(query) > self.policy.max_content_chars:
            raise BadRequest(
                f"query has {len(query)} characters; at most {self.policy.max_content_chars}",
                type="bad-query",
            )
        [embedded] = await self.embedder.embed([query])
        return as_vector(embedded)

    async def get(self, keys: ScopeKey | Sequence[ScopeKey], ids: Sequence[str]) -> list[Bullet]:
        """The live bullets of ``ids`` found in the playbooks ``keys``, in ``ids`` order."""
        wanted = bullet_ids(ids, self.policy.max_list_limit)
        held: dict[str, Bullet] = {}
        for key in listed(keys):
            async with self.open(key) as pb:
                now = self.clock()
                held |= {
                    i: pb.bullets[i]
                    for i in wanted
                    if i in pb.bullets and expires_at(pb.bullets[i]) > now
                }
        return [held[i] for i in dict.fromkeys(wanted) if i in held]

    async def page(
        self,
        keys: ScopeKey | Sequence[ScopeKey],
        *,
        limit: int,
        offset: str | None,
        section: str | None,
    ) -> tuple[list[Bullet], str | None]:
        """Live bullets of the playbooks ``keys`` by section, then age, then id; ``offset``
        is a position."""
        if limit > self.policy.max_list_limit:
            raise BadRequest(f"limit is {limit}; at most {self.policy.max_list_limit}")
        start = position(offset)
        live: list[Bullet] = []
        for key in listed(keys):
            async with self.open(key) as pb:
                live += [
                    b for b in pb.live(self.clock()) if section is None or b.section == section
                ]
        live.sort(key=lambda b: (b.section, b.created_at, b.id))
        end = start + limit
        return live[start:end], str(end) if end < len(live) else None

    async def stats(self, key: ScopeKey) -> Playbook:
        async with self.open(key) as pb:
            return pb

    def count(self, pb: Playbook) -> int:
        return len(pb.live(self.clock()))

    async def history_of(self, key: ScopeKey, limit: int) -> list[DeltaRecord]:
        """The latest ``limit`` delta records, newest first."""
        async with self.open(key) as pb:
            newest = pb.version
        versions = list(range(newest, max(newest - limit, 0), -1))
        return await self.history.records(key, versions)

    async def show(self, key: ScopeKey, version: int | None) -> list[Bullet]:
        """The bullets as delta ``version`` left them (version 0: none)."""
        async with self.open(key) as pb:
            return await self._snapshot(pb, version)

    async def _snapshot(self, pb: Playbook, version: int | None) -> list[Bullet]:
        if version is None:
            raise BadRequest("show and rollback need 'version'")
        if version > pb.version:
            raise BadRequest(
                f"version {version} does not exist; the playbook is at {pb.version}",
                type="not-found",
            )
        if version == 0:
            return []
        found = await self.history.snapshot(pb.key, version)
        if found is None:
            raise BadRequest(
                f"version {version} is older than the {self.policy.version_retention} kept",
                type="not-found",
            )
        return found

    # -- writes ------------------------------------------------------------------------
    async def apply(
        self, key: ScopeKey, delta: Delta | None, *, user: str | None = None
    ) -> Applied:
        """Apply ``delta`` once: a ``delta_id`` applied before changes nothing."""
        checked = deltas.check(delta, self.policy)
        vectors = await self.embed(deltas.contents(checked))
        async with self.open(key) as pb:
            return await self.apply_once(pb, checked, vectors, user)

    async def apply_as(
        self, own: ScopeKey, others: Sequence[ScopeKey], delta: Delta | None, user: str | None
    ) -> Applied:
        """Apply ``delta`` to the requester's own playbook ``own``, except its TAGs of
        bullets that live in the other playbooks the requester reads (the collection's, or
        one shared with them): feedback on a bullet used in a prompt counts where the
        bullet is (counters only; no text moves)."""
        checked = deltas.check(delta, self.policy)
        routed: list[BulletChange] = []
        rest = list(checked.operations)
        for other in others:
            tags = [o for o in rest if o.type == "TAG" and o.bullet_id]
            held = {b.id for b in await self.get(other, [o.bullet_id or "" for o in tags])}
            mine = [o for o in tags if str(uuid.UUID(o.bullet_id or "")) in held]
            if mine:
                sub = checked.model_copy(
                    update={"delta_id": f"{checked.delta_id}:tag", "operations": mine}
                )
                routed += (await self.apply(other, sub, user=user)).changes
                rest = [o for o in rest if o not in mine]
        if not rest:
            async with self.open(own) as pb:
                return Applied(pb.version, bool(routed), routed)
        done = await self.apply(own, checked.model_copy(update={"operations": rest}), user=user)
        return Applied(done.version, done.applied, routed + done.changes)

    async def rollback(
        self,
        key: ScopeKey,
        version: int | None,
        *,
        request_id: str | None = None,
        user: str | None = None,
    ) -> Applied:
        """A new version whose bullets equal those of ``version`` exactly (the access clock
        keeps running: restored access indexes decay from where they were)."""
        async with self.open(key) as pb:
            target = await self._snapshot(pb, version)
            delta_id = f"rollback:{request_id or f'{pb.version + 1}:{version}'}"
            before = await self.history.find(key, delta_id, pb.version)
            if before is not None:
                self.count_delta("duplicate")
                return Applied(before, False, [])
            new = pb.copy()
            new.bullets = {b.id: b for b in target}
            new.vectors = await self.vectors_for(pb, target)
            record = DeltaRecord(
                delta_id=delta_id,
                source="rollback",
                reason=f"rollback to version {version}",
                applied_at=self.clock(),
                user=user,
                changes=difference(pb.bullets, new.bullets),
            )
            committed = await self.commit(pb, new, record)
            return Applied(committed.version, True, record.changes)

    async def sweep(self) -> tuple[int, int]:
        """Remove expired bullets (a ``ttl`` version per playbook that had any); return how
        many were removed and how many bullets the store holds."""
        removed = held = 0
        now = self.clock()
        for scope in await self.scopes.scopes():
            for owner, context in sorted(await self.bullets.expired_contexts(scope, now)):
                key = ScopeKey(scope.workspace, scope.collection, context, owner or None)
                async with self.open(key) as pb:
                    work = deltas.Work(pb.copy(), self.clock(), self.policy)
                    refine.expire(work)
                    if work.changes:
                        record = DeltaRecord(
                            delta_id=f"ttl:{pb.version + 1}",
                            source="ttl",
                            reason="expired bullets",
                            applied_at=work.now,
                            changes=work.changes,
                        )
                        await self.commit(pb, work.pb, record)
                        removed += len(work.changes)
            held += await self.bullets.count(scope)
        return removed, held


def difference(old: dict[str, Bullet], new: dict[str, Bullet]) -> list[BulletChange]:
    """What turning ``old`` into ``new`` changes, bullet by bullet (for a rollback)."""
    changes = [BulletChange(bullet_id=i, change="removed") for i in sorted(old) if i not in new]
    for i in sorted(new):
        if i not in old:
            changes.append(BulletChange(bullet_id=i, change="added"))
        elif stored(old[i]) != stored(new[i]):
            changes.append(BulletChange(bullet_id=i, change="updated"))
    return changes


def listed(keys: ScopeKey | Sequence[ScopeKey]) -> list[ScopeKey]:
    return [keys] if isinstance(keys, ScopeKey) else list(keys)


def bullet_ids(ids: Sequence[str], limit: int) -> list[str]:
    if len(ids) > limit:
        raise BadRequest(f"ids: {len(ids)} ids; at most {limit} per request")
    try:
        return [str(uuid.UUID(value)) for value in ids]
    except ValueError:
        raise BadRequest("ids: every id must be a bullet id (a UUID)", type="bad-id") from None


def position(offset: str | None) -> int:
    if offset is None:
        return 0
    if not offset.isdigit():
        raise BadRequest(f"offset {offset!r} is not a position from a previous page")
    return int(offset)
