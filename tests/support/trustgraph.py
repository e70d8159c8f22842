"""TrustGraph 2.11's own client code (trustgraph-base, a test dependency) as the peer on
the embedded broker: its Pulsar backend, config client and agent client, unchanged."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from trustgraph.base.async_config_client import AsyncConfigClient
from trustgraph.base.async_pulsar_backend import AsyncPulsarBackend


@contextlib.asynccontextmanager
async def trustgraph_backend(url: str) -> AsyncIterator[Any]:
    """TrustGraph's async Pulsar backend connected to ``url``."""
    backend = AsyncPulsarBackend(host=url)
    try:
        yield backend
    finally:
        await backend.close()


@contextlib.asynccontextmanager
async def trustgraph_config(
    backend: Any, workspace: str | None = None, *, timeout: float = 20
) -> AsyncIterator[AsyncConfigClient]:
    """TrustGraph's config client on the system queue, or (``workspace`` given) on that
    workspace's own queues as TrustGraph 2.11's gateway uses them."""
    tail = f":{workspace}" if workspace is not None else ""
    client = await AsyncConfigClient.create(
        backend, f"request:tg:config{tail}", f"response:tg:config{tail}", timeout=timeout
    )
    try:
        yield client
    finally:
        await client.close()
