"""Messages of the ping diagnostic service (react-mem's own, not TrustGraph's)."""

from __future__ import annotations

from pydantic import Field

from react_mem.schema.base import WireModel
from react_mem.schema.primitives import Error


class PingRequest(WireModel):
    message: str = Field(default="", max_length=65536)


class PingResponse(WireModel):
    error: Error | None = None
    message: str = ""
    processor: str = ""
    workspace: str = ""
    flow: str = ""
