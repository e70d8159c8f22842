"""A request's vector on the wire: written by the fast path, read back as the same floats.

``WireModel.encode`` writes ``list[float]`` fields with pydantic-core instead of ``json``
(recall's three requests each carry the question's 384 floats); everything else is
``json.dumps``'s own text, in declaration order.
"""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from react_mem.schema.episodes import EpisodeRequest
from react_mem.schema.facts import FactRequest
from react_mem.schema.playbook import PlaybookRequest

FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)
VECTORS = st.lists(FLOATS, min_size=1, max_size=400)


@given(vector=VECTORS, query=st.text(max_size=40))
def test_a_vector_reads_back_as_the_same_floats(vector: list[float], query: str) -> None:
    request = FactRequest(operation="retrieve", user="ada", query=query, vector=vector)
    data = request.encode()
    read = json.loads(data)
    assert read["vector"] == vector
    signs = zip(read["vector"], vector, strict=True)
    assert all(math.copysign(1, a) == math.copysign(1, b) for a, b in signs)  # -0.0 too
    assert list(read) == list(FactRequest.model_fields)  # the declaration order
    assert FactRequest.decode(data) == request


@given(vector=VECTORS)
def test_the_rest_of_the_message_is_json_dumps_text(vector: list[float]) -> None:
    """Only the vector's floats may be spelt otherwise: the bytes without it are json's."""
    for request in (
        FactRequest(operation="retrieve", query="q", vector=vector),
        EpisodeRequest(operation="retrieve", query="q", vector=vector),
        PlaybookRequest(operation="retrieve", query="q", vector=vector),
    ):
        wire = request.to_wire()
        data = request.encode().decode("ascii")
        floats = json.dumps(wire["vector"])
        start = data.index('"vector": [') + len('"vector": ')
        end = data.index("]", start) + 1
        assert json.loads(data[start:end]) == json.loads(floats)
        assert data[:start] + floats + data[end:] == json.dumps(wire)


def test_no_vector_is_plain_json_dumps() -> None:
    for request in (FactRequest(operation="list"), FactRequest(operation="retrieve", vector=[])):
        assert request.encode() == json.dumps(request.to_wire()).encode()


def test_non_finite_floats_are_written_as_json_writes_them() -> None:
    request = FactRequest(operation="retrieve", vector=[math.inf, -math.inf, 0.5])
    assert request.encode() == json.dumps(request.to_wire()).encode()
