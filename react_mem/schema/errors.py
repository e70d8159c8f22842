"""The enumerated ``Error.type`` values a react-mem service answers with.

``Error.type`` stays a plain string on the wire (a TrustGraph peer may send its own); the
services raise only these, mypy checks every ``BadRequest(..., type=...)`` against them, and
the clients (:mod:`react_mem.clients.errors`) map each to one exception class.
"""

from __future__ import annotations

from typing import Literal, get_args

ErrorType = Literal[
    # The message itself: not decodable, not the schema, or too big.
    "bad-request",
    "malformed",
    "invalid",
    "too-large",
    "bad-operation",
    # A field the service checks: content, ids, vectors, queries, conditions, ...
    "bad-content",
    "bad-condition",
    "bad-delta",
    "bad-grant",
    "bad-id",
    "bad-limit",
    "bad-query",
    "bad-share",
    "bad-text",
    "bad-vector",
    "bad-weights",
    "missing-scope",
    "missing-user",
    # The request is well-formed but refused in the state the service is in.
    "not-found",
    "forbidden",
    "quota-exceeded",
    "conflict",
    "superseded",
    "unchanged",
    "pii-refused",
    "not-configured",
    # The service failed, not the request: worth asking again later.
    "processing-failed",
    "disk-full",
    "llm-error",
    # The agent's answer to its own caller.
    "agent-error",
]

#: Every value of :data:`ErrorType`.
ERROR_TYPES: frozenset[str] = frozenset(get_args(ErrorType))
