"""``sorted``: one owner's current facts ordered by time, importance or access, paged.

The store pages records in id order only, so a page in another order needs every current
fact of the owner: they are read in pages of ``SCAN_PAGE`` through the same scope as
``list`` (so only the owner's facts, and with a conversation id only that conversation's),
and ordered; the page's facts are then read by id (fresh, access counts laid over from the
side table as every read does). Ties go by id, so pages neither repeat nor skip a fact while
nothing changes.

Reading 10k records takes seconds on a small machine, so :class:`SortKeys` keeps each
owner's sort keys (a few numbers a fact, no content) until a write touches that owner (the
store overlay tells it, :class:`.access_overlay.AccessOverlay`) or a retrieval counts an
access of theirs; a scan overlapping a write is not kept. Paging and re-sorting one owner's
facts then costs one read of the page.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from memory_services.facts import records as rec
from memory_services.facts.access_table import OwnerKey
from memory_services.facts.context import FactContext
from memory_services.store.base import Record, Scope
from react_mem.errors import BadRequest
from react_mem.schema.facts import FACT_SORTS, Fact, FactSort

#: Records per store call while reading an owner's facts (the store's largest page).
SCAN_PAGE = 10_000
#: Owners (with a conversation, or none) whose sort keys are kept, least recently used out.
KEPT = 16

#: id, expires_at, time (updated, else created), importance, access count.
Keys = tuple[str, float, float, float, float]
_COLUMN: dict[FactSort, int] = {"time": 2, "importance": 3, "access": 4}


def _keys(r: Record) -> Keys:
    p = r.payload
    time = float(p.get("updated_at") or p.get("created_at") or 0.0)
    expires = float(p.get("expires_at") or rec.NEVER)
    importance, accesses = float(p.get("importance") or 0.0), float(p.get("access_count") or 0)
    return (r.id, expires, time, importance, accesses)


class SortKeys:
    """Each owner's facts' sort keys, dropped when that owner's facts change."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._held: OrderedDict[tuple[OwnerKey, str | None], list[Keys]] = OrderedDict()
        #: Counts writes: a scan that saw one begin or end while it ran is not kept.
        self._writes = 0

    def changed(self, owner: OwnerKey | None) -> None:
        """``owner``'s facts changed (None: any owner's)."""
        self._writes += 1
        if owner is None:
            self._held.clear()
        else:
            for key in [k for k in self._held if k[0] == owner]:
                del self._held[key]

    async def of(self, ctx: FactContext, scope: Scope) -> list[Keys]:
        key = ((scope.workspace, scope.collection, scope.user or ""), scope.conversation)
        held = self._held.get(key)
        if held is not None:
            self._held.move_to_end(key)
            return held
        writes, found, cursor = self._writes, [], None
        where = rec.live(ctx.clock())
        while True:
            page, cursor = await ctx.scroll(scope, where, SCAN_PAGE, cursor)
            found += [_keys(r) for r in page]
            if cursor is None:
                break
        if writes == self._writes:
            self._held[key] = found
            while len(self._held) > self.kept:
                self._held.popitem(last=False)
        return found


def position(offset: str | None) -> int:
    """The page's first position: ``offset`` as a count of facts ("0" when absent)."""
    if offset is None or offset == "":
        return 0
    if not offset.isdigit() or len(offset) > 9:
        raise BadRequest(
            f"sorted: offset must be a position (0, 50, ...), got {offset[:40]!r}",
            type="invalid",
        )
    return int(offset)


async def sorted_page(
    ctx: FactContext,
    keys: SortKeys,
    scope: Scope,
    sort_by: FactSort | None,
    *,
    ascending: bool = False,
    limit: int = 50,
    offset: str | None = None,
) -> tuple[list[Fact], str | None, int]:
    """The page, the next page's offset (None at the end) and how many there are."""
    if sort_by is None:
        raise BadRequest(f"sorted needs 'sort_by': one of {', '.join(FACT_SORTS)}", type="invalid")
    if limit > ctx.policy.max_list_limit:
        raise BadRequest(f"limit is {limit}; at most {ctx.policy.max_list_limit}")
    start = position(offset)
    now = ctx.clock()
    live = [k for k in await keys.of(ctx, scope) if k[1] > now]
    column, sign = _COLUMN[sort_by], 1.0 if ascending else -1.0
    live.sort(key=lambda k: (sign * float(k[column]), k[0]))
    chosen = [k[0] for k in live[start : start + limit]]
    following = str(start + limit) if start + limit < len(live) else None
    return await _read(ctx, scope, chosen, now), following, len(live)


async def _read(ctx: FactContext, scope: Scope, ids: Sequence[str], now: float) -> list[Fact]:
    """The facts ``ids`` in that order, as stored now (one gone since: left out)."""
    if not ids:
        return []
    found = {r.id: r for r in await ctx.get(ids, scope) if float(r.payload["expires_at"]) > now}
    return [rec.to_fact(i, found[i].payload) for i in ids if i in found]
