"""Hostile payloads for the bad-input and fuzz tests: fixed worst cases and generators."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from pydantic import Field

from react_mem.schema.base import WireModel

#: 10,000 levels: deep enough to overflow a recursive decoder, ~20 KB on the wire.
DEEP_ARRAY = b"[" * 10_000 + b"]" * 10_000
DEEP_OBJECT = b'{"a":' * 10_000 + b"1" + b"}" * 10_000


class RawBytes(WireModel):
    """A request that sends exactly ``data``, whatever it is."""

    data: bytes = Field(default=b"")

    def __init__(self, data: bytes) -> None:
        super().__init__(data=data)

    def encode(self) -> bytes:
        return self.data


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
_json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"0" + b"}" * depth


def _lone_surrogate(text: str, surrogate: int) -> str:
    """``text`` with a JSON-escaped lone surrogate in the middle."""
    half = len(text) // 2
    return json.dumps(text[:half])[:-1] + f"\\u{surrogate:04x}" + json.dumps(text[half:])[1:]


def payloads(fields: list[str], operations: tuple[str, ...] = ()) -> st.SearchStrategy[bytes]:
    """Bytes a hostile client might send to a queue whose schema has ``fields``; with
    ``operations``, objects often name a real one, so the handlers see the garbage too."""
    field_names = st.sampled_from(fields) if fields else st.text(max_size=8)
    objects = st.dictionaries(field_names, _json_values, max_size=5)
    if operations:
        objects = (
            st.builds(lambda d, op: d | {"operation": op}, objects, st.sampled_from(operations))
            | objects
        )
    wrong_types = objects.map(lambda d: json.dumps(d).encode())
    surrogates = st.builds(
        lambda name, text, s: f'{{"{name}": {_lone_surrogate(text, s)}}}'.encode(),
        field_names,
        st.text(max_size=20),
        st.integers(min_value=0xD800, max_value=0xDFFF),
    )
    nesting = st.builds(
        lambda name, depth, kind: b'{"' + name.encode() + b'": ' + _nested(depth, kind) + b"}",
        field_names,
        st.integers(min_value=60, max_value=12_000),
        st.sampled_from(["array", "object"]),
    )
    numbers = st.builds(
        lambda name, digits, constant: (
            f'{{"{name}": {"9" * digits if constant is None else constant}}}'.encode()
        ),
        field_names,
        st.integers(min_value=1, max_value=6_000),
        st.none() | st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0"]),
    )
    not_objects = _json_values.map(lambda v: json.dumps(v).encode())
    garbage = st.binary(max_size=200)
    broken_utf8 = st.binary(min_size=1, max_size=20).map(lambda b: b'{"x": "' + b"\xff" + b + b'"}')
    return st.one_of(wrong_types, surrogates, nesting, numbers, not_objects, garbage, broken_utf8)


def schema_fields(schema: type[WireModel]) -> list[str]:
    return [info.alias or name for name, info in schema.model_fields.items()]


def is_object(payload: bytes) -> Any:
    """The decoded object, or None when ``payload`` is not a JSON object."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
