"""Ping-based helpers shared by the integration tests."""

from __future__ import annotations

import json
import time
from pathlib import Path

from react_mem.bus.rpc import RequestResponseClient
from react_mem.errors import RequestTimeout
from react_mem.schema.ping import PingRequest, PingResponse

PingClient = RequestResponseClient[PingRequest, PingResponse]


def flow_file(tmp_path: Path, processor_id: str, topics: dict[str, str], flow: str = "f1") -> Path:
    """A flow file giving ``processor_id`` one flow in workspace ``default``."""
    path = tmp_path / f"flows-{processor_id}.yaml"
    definition = {"default": {f"processor:{processor_id}": {flow: {"topics": topics}}}}
    path.write_text(json.dumps(definition))  # JSON is YAML
    return path


async def answered(client: PingClient, timeout: float = 15.0) -> PingResponse:
    """Ping until answered: requests sent before the processor subscribes are dropped."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await client.request(PingRequest(message="up?"), timeout=0.5)
        except RequestTimeout:
            if time.monotonic() > deadline:
                raise
