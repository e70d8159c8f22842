"""A payload field that records written before it existed lack, filled in once by a
maintenance pass over every owner of every known collection (in pages, in the background).

Used for the ``tells_time`` flag of facts and conversation turns: the "when" boost ranks by
it, and a record without it would never be lifted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memory_services.store.base import AllOwners, Condition, VectorStore

PAGE = 256


async def fill_missing(
    store: VectorStore,
    collection: str,
    scopes: Sequence[AllOwners],
    key: str,
    value_of: Callable[[Mapping[str, Any]], Any],
    *,
    where: Sequence[Condition] = (),
    fields: Callable[[Any], Mapping[str, Any]] | None = None,
) -> int:
    """Set ``key`` to ``value_of(payload)`` on the records of ``scopes`` matching ``where``
    that have no ``key`` (or write ``fields(value)``, which must set ``key``); return how
    many were filled."""
    filled = 0
    missing = [*where, Condition(key, missing=True)]
    for scope in scopes:
        offset: str | None = None
        while True:
            page, offset = await store.scroll(
                collection, scope=scope, where=missing, limit=PAGE, offset=offset
            )
            by_value: dict[Any, list[str]] = {}
            for record in page:
                by_value.setdefault(value_of(record.payload), []).append(record.id)
            for value, ids in by_value.items():
                written = {key: value} if fields is None else fields(value)
                await store.set_payload(collection, ids, written, scope=scope)
            filled += len(page)
            if offset is None:
                break
    return filled
