"""Checks both backends apply before anything reaches an engine, so that bad ids, vectors,
conditions and scope-less records fail the same way (and early) on either backend."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from memory_services.store.base import SCOPE_KEYS, Condition, Record, ScopeRequired
from react_mem.errors import BadRequest, ConfigurationError

#: Collection names become directory names on the edge backend.
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
#: The largest page a scroll (and a get) may ask for.
MAX_PAGE = 10_000


def collection_name(name: str) -> str:
    if not _COLLECTION.match(name) or ".." in name:
        raise ConfigurationError(
            f"collection name {name!r}: use letters, digits, '.', '_' or '-' (at most 128)"
        )
    return name


def record_id(value: object) -> str:
    """The canonical (lower-case, hyphenated) form of a UUID string; both engines return it."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError as exc:
        raise BadRequest(f"record id {value!r} is not a UUID", type="bad-id") from exc


def record_ids(values: Iterable[object]) -> list[str]:
    """Canonical ids, duplicates dropped, order kept."""
    return list(dict.fromkeys(record_id(v) for v in values))


def vector(values: Sequence[float] | None, size: int) -> list[float]:
    if values is None or len(values) != size:
        got = "none" if values is None else f"{len(values)} dimensions"
        raise BadRequest(f"expected a {size}-dimensional vector, got {got}", type="bad-vector")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BadRequest("a vector holds numbers only", type="bad-vector") from exc
    if array.shape != (size,) or not np.isfinite(array).all() or not array.any():
        raise BadRequest("a vector must be finite and non-zero", type="bad-vector")
    floats: list[float] = array.tolist()
    return floats


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float] | None]) -> list[float]:
    """Each vector's cosine similarity to ``query`` (stored vectors are unit length; a
    missing one scores 0)."""
    unit = np.asarray(query, dtype=np.float64)
    unit /= np.linalg.norm(unit)
    return [0.0 if v is None else float(np.dot(unit, np.asarray(v))) for v in vectors]


def record(rec: Record, size: int) -> tuple[str, list[float], dict[str, Any]]:
    """Id, vector and payload of a record to upsert; its payload must hold its scope."""
    payload = dict(rec.payload)
    for key in SCOPE_KEYS[:2]:
        if not isinstance(payload.get(key), str) or not payload[key]:
            raise ScopeRequired(f"record {rec.id} has no {key} in its payload")
    for key in SCOPE_KEYS[2:]:  # absent for no user / no conversation, never "" (see Scope)
        if payload.get(key) is not None and (not isinstance(payload[key], str) or not payload[key]):
            raise ScopeRequired(f"record {rec.id}: {key} must be a non-empty string or absent")
    return record_id(rec.id), vector(rec.vector, size), payload


def payload_update(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A payload merged into existing records may not move them to another scope."""
    moved = sorted(set(payload) & set(SCOPE_KEYS))
    if moved:
        raise ScopeRequired(f"set_payload cannot change scope keys {moved}")
    return dict(payload)


def condition(cond: Condition) -> Condition:
    """Exactly one matcher: ``equals``, ``any_of``, a range (``gt``..``lte``) or ``missing``."""
    ranged = any(v is not None for v in (cond.gt, cond.gte, cond.lt, cond.lte))
    kinds = [cond.equals is not None, cond.any_of is not None, ranged, cond.missing is not None]
    if sum(kinds) != 1 or not cond.key:
        raise BadRequest(
            f"condition {cond!r} needs a key and exactly one matcher", type="bad-condition"
        )
    if cond.any_of is not None and isinstance(cond.any_of, str | bytes):
        raise BadRequest(f"condition on {cond.key!r}: any_of takes a list", type="bad-condition")
    return cond


def limit(value: int, *, name: str = "limit") -> int:
    if not 1 <= value <= MAX_PAGE:
        raise BadRequest(f"{name} must be between 1 and {MAX_PAGE}, got {value}", type="bad-limit")
    return value
