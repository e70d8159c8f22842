"""Removing bullets for good: ``delete``, ``purge`` and ``forget``.

A bullet lives on in the playbook's kept versions (snapshots) and delta records (the ADD
that wrote it, the reason that quoted it), so removing one commits a version without it
and then scrubs every kept snapshot and record of that playbook: the snapshots lose the
bullet, the records lose the operations that named it or carried its wording (content or
an alias), and a record the forgotten user applied loses its operations and reason. Version
numbers and delta ids stay, so history stays ordered and redelivery stays harmless. Then
the store rewrites its files (where it can), so the deleted bytes leave the disk too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable

from memory_services.playbook.access import PlaybookAccess
from memory_services.playbook.lifecycle import Playbooks
from memory_services.playbook.records import ScopeKey, content_hash, normalise
from memory_services.playbook.versions import COLLECTION, decode, encode
from memory_services.store.base import Record, Scope
from react_mem.schema.playbook import Bullet, BulletChange, DeltaRecord

logger = logging.getLogger(__name__)

Match = Callable[[Bullet], bool]


def _hashes(bullets: Iterable[Bullet]) -> set[str]:
    found: set[str] = set()
    for b in bullets:
        found.add(b.content_hash)
        found.update(content_hash(normalise(alias)) for alias in b.aliases)
    return found


class Erasing(Playbooks):
    @property
    def access(self) -> PlaybookAccess:
        return PlaybookAccess(self.store)

    async def erase(
        self, key: ScopeKey, match: Match, *, user: str | None, author: str | None = None
    ) -> Counter[str]:
        """Remove the bullets ``match`` picks from the playbook and from its history; with
        ``author``, also blank the delta records that user applied."""
        counts: Counter[str] = Counter()
        async with self.open(key) as pb:
            doomed = sorted(i for i, b in pb.bullets.items() if match(b))
            if doomed:
                new = pb.copy()
                for i in doomed:
                    new.bullets.pop(i)
                    new.vectors.pop(i, None)
                record = DeltaRecord(
                    delta_id=f"erase:{pb.version + 1}",
                    source="erase",
                    reason="bullets deleted",
                    applied_at=self.clock(),
                    user=user,
                    changes=[BulletChange(bullet_id=i, change="removed") for i in doomed],
                )
                await self.commit(pb, new, record)
                counts["bullets"] += len(doomed)
            counts += await self._scrub(key, match, set(doomed), author)
        return counts

    async def _scrub(
        self, key: ScopeKey, match: Match, ids: set[str], author: str | None
    ) -> Counter[str]:
        counts: Counter[str] = Counter()
        hashes: set[str] = set()
        rewritten: list[Record] = []
        for record in await self.history.scan(key, "snapshot"):
            bullets = decode(str(record.payload["bullets"]))
            gone = [b for b in bullets if b.id in ids or match(b)]
            if gone:
                ids.update(b.id for b in gone)
                hashes |= _hashes(gone)
                kept = [b for b in bullets if b.id not in ids]
                payload = dict(record.payload) | {"bullets": encode(kept)}
                rewritten.append(Record(record.id, payload, record.vector))
                counts["snapshots"] += 1
        for record in await self.history.scan(key, "version"):
            delta = DeltaRecord.model_validate(record.payload["record"])
            clean = _scrubbed(delta, ids, hashes, author)
            if clean != delta:
                payload = dict(record.payload) | {"record": clean.model_dump(mode="json")}
                rewritten.append(Record(record.id, payload, record.vector))
                counts["delta_records"] += 1
        await self.history.rewrite(rewritten)
        return counts

    async def purge(self, key: ScopeKey) -> Counter[str]:
        """Delete the playbook ``key``: bullets, versions, snapshots, state, relations."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            counts: Counter[str] = Counter()
            counts["grants"] += await self.access.drop_all(key)
            counts["bullets"] += await self.bullets.drop(key)
            dropped = await self.history.drop(key)
            counts["delta_records"] += dropped["version"]
            counts["snapshots"] += dropped["snapshot"]
            self.forget(key)
        return counts

    async def forget_user(
        self, workspace: str, collections: Iterable[str], user: str
    ) -> Counter[str]:
        """Everything of ``user`` in ``collections``: their playbooks in every context, the
        relations they gave and were given, and what they wrote into playbooks shared with
        them and into the collection-wide ones."""
        counts: Counter[str] = Counter()
        for collection in collections:
            own = Scope(workspace, collection, user)
            contexts = await self.history.contexts(own)
            contexts |= await self.bullets.contexts(own)
            contexts |= await self.history.contexts(Scope(workspace, collection))
            for context in sorted(contexts):
                key = ScopeKey(workspace, collection, context, user)
                others = [key.of(None), *await self.access.shared_with(key, user)]
                for other in others:
                    counts += await self.erase(
                        other, lambda b: b.user == user, user=None, author=user
                    )
                counts["grants"] += await self.access.forget_grantee(key, user)
                counts += await self.purge(key)
        return counts

    async def compact(self) -> list[str]:
        """Have the store rewrite its files without the deleted records (where it can);
        the collections it rewrote."""
        done = []
        for name in (self.bullets.collection, COLLECTION):
            try:
                if await self.store.compact(name):
                    done.append(name)
            except Exception:  # the records are deleted; their bytes go at the next rewrite
                logger.exception("playbook: compacting %s failed", name)
        return done


def _scrubbed(
    delta: DeltaRecord, ids: set[str], hashes: set[str], author: str | None
) -> DeltaRecord:
    """``delta`` without what named or carried a removed bullet (all of it if ``author``
    applied it)."""
    if author is not None and delta.user == author:
        return delta.model_copy(
            update={"operations": [], "changes": [], "reason": "", "user": None}
        )
    operations = [
        op
        for op in delta.operations
        if not (op.bullet_id and op.bullet_id in ids)
        and not (op.content and content_hash(normalise(op.content)) in hashes)
    ]
    changes = [c for c in delta.changes if c.bullet_id not in ids and c.into not in ids]
    if len(operations) == len(delta.operations) and len(changes) == len(delta.changes):
        return delta
    return delta.model_copy(update={"operations": operations, "changes": changes, "reason": ""})
