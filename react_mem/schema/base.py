"""Wire-model base: TrustGraph's JSON shape on top of pydantic v2.

TrustGraph serialises dataclasses with ``json.dumps`` of a dict holding every field in
declaration order, ``null`` for None. Readers ignore unknown keys and default missing ones.
A ``null`` arriving for a field that cannot hold None is read as "missing" (defaulted),
because TrustGraph's own readers never validate and peers do send it.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import ErrorDetails, PydanticSerializationError, from_json, to_json

from react_mem.errors import BadRequest
from react_mem.schema.payload import (
    PayloadError,
    check_payload,
    may_exceed,
    may_hold_surrogates,
    may_nest,
)
from react_mem.schema.scope import owner_id

#: The request field naming what a service is asked to do.
OPERATION = "operation"
#: Largest message body accepted from the bus (pulsar-lite's and Pulsar's default limit).
MAX_MESSAGE_BYTES = 5 * 1024 * 1024
#: Most values a memory service's request may hold (its ``max_values``): ten times the
#: biggest valid one (an episode of 200 steps, a batch of 256 facts), and few enough to
#: read in well under a second.
MAX_REQUEST_VALUES = 50_000


#: Fields holding user ids, in any message: normalised where they enter (see
#: :func:`react_mem.schema.scope.owner_id`), so look-alike ids are one owner everywhere.
OWNER_FIELDS = frozenset({"user", "playbook_owner", "grantees"})


def _owner_ids(key: str, value: Any) -> Any:
    if isinstance(value, list):
        return [_owner_ids(key, v) for v in value]
    if not isinstance(value, str) or not value:
        return value
    normal = owner_id(value)
    if not normal:
        raise ValueError(f"{key}: an id of invisible characters only ({value!r}) names no one")
    return normal


def _accepts_none(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return annotation is None or annotation is Any


#: Each wire model's fields that cannot hold None, found once per class (every message
#: decoded asked the annotations again: a tenth of the agent stack's loop time).
_NEVER_NONE: dict[type, frozenset[str]] = {}


def _never_none(cls: type[BaseModel]) -> frozenset[str]:
    found = _NEVER_NONE.get(cls)
    if found is None:
        fields = cls.model_fields.items()
        found = frozenset(name for name, info in fields if not _accepts_none(info.annotation))
        _NEVER_NONE[cls] = found
    return found


def _is_vector(annotation: Any) -> bool:
    """``list[float]``, or ``list[float] | None``: a vector (384 floats for MiniLM)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else None
    return typing.get_origin(annotation) is list and typing.get_args(annotation) == (float,)


#: Each wire model's vector fields, found once per class.
_VECTORS: dict[type, frozenset[str]] = {}


def _vectors(cls: type[BaseModel]) -> frozenset[str]:
    found = _VECTORS.get(cls)
    if found is None:
        fields = cls.model_fields.items()
        found = frozenset(name for name, info in fields if _is_vector(info.annotation))
        _VECTORS[cls] = found
    return found


def _dumps(wire: dict[str, Any], vectors: frozenset[str]) -> str:
    """``json.dumps(wire)``, but each vector written by pydantic-core: eight times faster
    than the ``float.__repr__`` of ``json`` (a recall's three requests each carry the
    question's 384 floats). The same values, digit for digit (both write the shortest
    repr that reads back as the same float); an exponent may be spelt ``1e-5`` for
    ``1e-05``, which every JSON reader reads alike. Separators stay ``json``'s."""
    parts: list[str] = []
    plain: dict[str, Any] = {}
    for key, value in wire.items():
        if key in vectors and value:
            if plain:
                parts.append(json.dumps(plain)[1:-1])
                plain = {}
            floats = to_json(value, inf_nan_mode="constants").decode().replace(",", ", ")
            parts.append(f"{json.dumps(key)}: {floats}")
        else:
            plain[key] = value
    if plain:
        parts.append(json.dumps(plain)[1:-1])
    return "{" + ", ".join(parts) + "}"


def _compact(wire: dict[str, Any]) -> bytes:
    """``wire`` as JSON by pydantic-core (floats as ``json`` writes them: the shortest repr,
    ``NaN`` and ``Infinity`` for the non-finite); a text holding a lone surrogate, which
    UTF-8 cannot hold, is written by ``json`` (escaped), as before."""
    try:
        return to_json(wire, inf_nan_mode="constants")
    except PydanticSerializationError:
        return json.dumps(wire).encode("utf-8")


class WireModel(BaseModel):
    """A message on the bus. Field names and order are the wire contract."""

    model_config = ConfigDict(extra="ignore", validate_default=False)
    #: Most values (list items and object fields, at any depth) one message may hold;
    #: beyond it the message is refused when decoded (``too-large``), before it is
    #: validated: what a request may carry is bounded, and so is the work of reading it.
    #: None: no bound (replies, whose size the service chose).
    max_values: ClassVar[int | None] = None
    #: Written by pydantic-core, without the spaces after separators and with UTF-8 rather
    #: than ``\u`` escapes: the same JSON values in the same order, three times faster
    #: than ``json.dumps`` (a recall's 20 facts: 119 against 40 us). For the memory
    #: searches' replies, which no TrustGraph peer pins byte for byte; everything else is
    #: ``json.dumps``'s own text.
    compact: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        never = _never_none(cls)
        return {
            key: _owner_ids(key, value) if key in OWNER_FIELDS else value
            for key, value in data.items()
            if value is not None or key not in never
        }

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict TrustGraph's ``dataclass_to_dict`` would produce."""
        # by_alias explicitly: the ``serialize_by_alias`` config needs pydantic >= 2.11.
        return self.model_dump(mode="json", by_alias=True)

    def encode(self) -> bytes:
        """Serialise to the bytes that travel on the bus."""
        if self.compact:
            return _compact(self.to_wire())
        vectors = _vectors(type(self))
        if vectors:
            return _dumps(self.to_wire(), vectors).encode("utf-8")
        return json.dumps(self.to_wire()).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """Parse bus bytes, raising :class:`BadRequest` that says what is wrong."""
        if len(data) > MAX_MESSAGE_BYTES:
            raise BadRequest(
                f"{cls.__name__}: message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}",
                type="too-large",
            )
        try:
            payload = _loads(data)
        except RecursionError as exc:
            raise BadRequest(f"{cls.__name__}: JSON nested too deeply", type="malformed") from exc
        except ValueError as exc:  # bad UTF-8, bad JSON, NaN, an integer of > 4300 digits
            raise BadRequest(f"{cls.__name__}: not valid JSON: {exc}", type="malformed") from exc
        if not isinstance(payload, dict):
            raise BadRequest(
                f"{cls.__name__}: expected a JSON object, got {type(payload).__name__}",
                type="malformed",
            )
        try:
            texts = may_hold_surrogates(data)
            most = cls.max_values
            if texts or may_nest(data) or (most is not None and may_exceed(data, most)):
                check_payload(payload, texts=texts, max_values=most)
            return cls.model_validate(payload)
        except PayloadError as exc:
            raise BadRequest(f"{cls.__name__}: {exc}", type=exc.type) from exc
        except ValidationError as exc:
            raise BadRequest(f"{cls.__name__}: {_describe(exc)}", type=_error_type(exc)) from exc


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(data: bytes) -> Any:
    """``json.loads(data)``, read by pydantic-core's parser where it can: six times faster
    on a vector's floats (a recall request's 384: 150 against 25 us), the same values
    (floats correctly rounded both ways, integers of at most 4,300 digits, the last of a
    repeated key). What it refuses (anything ``json`` refuses too, and a lone surrogate's
    escape, a byte-order mark or UTF-16, which ``json`` reads) is read again by ``json``,
    so a message is accepted, refused and described exactly as before. No text is kept in
    the parser's string cache (``cache_strings``): nothing of a message outlives it."""
    try:
        return from_json(data, allow_inf_nan=False, cache_strings=False)
    except ValueError:
        return json.loads(data, parse_constant=_refuse_constant)


def _error_type(exc: ValidationError) -> Literal["bad-operation", "too-large", "invalid"]:
    """``bad-operation`` when only the ``operation`` is wrong (every service's operations are
    a closed ``Literal``, so an unknown or missing one never reaches a dispatch),
    ``too-large`` when only lists or texts are over their limits."""
    errors = exc.errors()
    if all(_is_bad_operation(err) for err in errors):
        return "bad-operation"
    if all(err["type"] == "too_long" for err in errors):
        return "too-large"
    return "invalid"


def _is_bad_operation(err: ErrorDetails) -> bool:
    return err["loc"] == (OPERATION,) and err["type"] in ("literal_error", "missing")


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "<root>"
        if _is_bad_operation(err) and err["type"] == "missing":
            parts.append("operation is required")
        elif _is_bad_operation(err):
            expected = err.get("ctx", {}).get("expected", "")
            parts.append(f"unknown operation {err['input']!r:.80}; expected {expected}")
        elif err["type"] == "too_long":  # a list is refused at its limit, not counted
            most = err.get("ctx", {}).get("max_length")
            parts.append(f"{where}: more than {most} items; the limit is {most}")
        else:
            parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
