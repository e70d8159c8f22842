"""``sorted``: one owner's current facts ordered by time, importance or access, paged.

The store pages records in id order only, so a page in another order needs every current
fact of the owner: they are read in pages of ``SCAN_PAGE`` through the same scope as
``list`` (so only the owner's facts, and with a conversation id only that conversation's),
their access counts laid over from the side table as every read does, ordered, and the
page cut out. Ties go by id, so pages neither repeat nor skip a fact while nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable

from memory_services.facts import records as rec
from memory_services.facts.context import FactContext
from memory_services.store.base import Record, Scope
from react_mem.errors import BadRequest
from react_mem.schema.facts import FACT_SORTS, Fact, FactSort

#: Records per store call while reading an owner's facts (the store's largest page).
SCAN_PAGE = 10_000

_KEYS: dict[FactSort, Callable[[Record], float]] = {
    "time": lambda r: float(r.payload.get("updated_at") or r.payload.get("created_at") or 0.0),
    "importance": lambda r: float(r.payload.get("importance") or 0.0),
    "access": lambda r: float(r.payload.get("access_count") or 0),
}


def position(offset: str | None) -> int:
    """The page's first position: ``offset`` as a count of facts ("0" when absent)."""
    if offset is None or offset == "":
        return 0
    if not offset.isdigit() or len(offset) > 9:
        raise BadRequest(
            f"sorted: offset must be a position (0, 50, ...), got {offset[:40]!r}",
            type="bad-offset",
        )
    return int(offset)


async def sorted_page(
    ctx: FactContext,
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
    records: list[Record] = []
    where, cursor = rec.live(ctx.clock()), None
    while True:
        page, cursor = await ctx.scroll(scope, where, SCAN_PAGE, cursor)
        records.extend(page)
        if cursor is None:
            break
    key = _KEYS[sort_by]
    sign = 1.0 if ascending else -1.0
    records.sort(key=lambda r: (sign * key(r), r.id))
    chosen = records[start : start + limit]
    following = str(start + limit) if start + limit < len(records) else None
    return [rec.to_fact(r.id, r.payload) for r in chosen], following, len(records)
