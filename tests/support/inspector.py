"""The inspector over a test stack's queues: its app in-process (httpx) or served (uvicorn)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping

import httpx
import uvicorn
from starlette.applications import Starlette

from react_mem.bus.transport import Transport
from react_mem.commands.common import ServiceQueues
from react_mem.commands.forget import LEARNER
from react_mem.inspector.app import build_app
from react_mem.inspector.auth import Gate
from react_mem.inspector.backend import Memory
from react_mem.processor.runtime import free_port
from tests.support.agent_stack import Stack, forget_queues

TOKEN = "inspector-test-token-0123456789"


def stack_memory(stack: Stack) -> Memory:
    """A :class:`Memory` reaching ``stack``'s services (their queues are the test's own)."""
    return memory_over(stack.transport, stack.topics, stack.unique, learner=bool(stack.others))


def memory_over(
    transport: Transport,
    topics: Mapping[str, Mapping[str, str]],
    unique: str,
    *,
    learner: bool = False,
) -> Memory:
    def queues(service: str, workspace: str, flow: str) -> ServiceQueues:
        return ServiceQueues(topics[service]["request"], topics[service]["response"])

    def targets(workspace: str, flow: str) -> dict[str, ServiceQueues]:
        found = {
            name: ServiceQueues(q["request"], q["response"])
            for name, q in topics.items()
            if name in ("fact-memory", "episode-memory", "conversation-memory", "playbook-memory")
        }
        if learner:
            found[LEARNER] = forget_queues(unique)
        return found

    return Memory(
        transport,
        queues=queues,
        forget_targets=targets,
        audit=lambda workspace, flow: f"flow:tg:memory-audit-{unique}:{workspace}:{flow}",
        timeout=30.0,
        forget_timeout=60.0,
    )


@contextlib.asynccontextmanager
async def inspector_client(memory: Memory) -> AsyncIterator[tuple[httpx.AsyncClient, Starlette]]:
    """The app in-process, through httpx (no login yet)."""
    app = build_app(memory, Gate(TOKEN))
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://inspector.test"
    )
    try:
        yield client, app
    finally:
        await client.aclose()
        await app.state.trail.close()
        await memory.close()


async def log_in(client: httpx.AsyncClient) -> str:
    """Log in with the token; the CSRF token of the session (read from a page's form)."""
    reply = await client.post("/login", data={"token": TOKEN})
    assert reply.status_code == 303, reply.text
    page = await client.get("/forget", headers={"accept": "text/html"})
    return csrf_of(page.text)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


@contextlib.asynccontextmanager
async def served(memory: Memory) -> AsyncIterator[str]:
    """The app on a real port of this machine (for a browser); its base URL."""
    port = free_port()
    app = build_app(memory, Gate(TOKEN))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        await memory.close()
