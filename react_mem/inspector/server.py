"""Serving the inspector: uvicorn in the caller's event loop, over the caller's bus."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

import uvicorn

from react_mem.bus.transport import Transport
from react_mem.errors import ConfigurationError
from react_mem.inspector.app import build_app
from react_mem.inspector.auth import Gate, new_token
from react_mem.inspector.backend import Memory

TOKEN_ENV = "REACT_MEM_INSPECTOR_TOKEN"
DEFAULT_PORT = 8700
#: Loopback only unless told otherwise: the pages show personal data.
DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class InspectorSettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    #: None: REACT_MEM_INSPECTOR_TOKEN, else a new one printed once at start.
    token: str | None = None


class _Server(uvicorn.Server):
    """uvicorn leaving signals to its host (``react-mem up`` runs it beside the stack)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def token_of(settings: InspectorSettings) -> tuple[str, bool]:
    """The token, and whether it was generated here (and so must be printed)."""
    given = settings.token or os.environ.get(TOKEN_ENV)
    if given:
        return given, False
    return new_token(), True


def url_of(settings: InspectorSettings) -> str:
    host = "localhost" if settings.host in ("127.0.0.1", "0.0.0.0", "::") else settings.host
    return f"http://{host}:{settings.port}/"


async def serve_inspector(
    transport: Transport,
    settings: InspectorSettings,
    *,
    out: TextIO = sys.stdout,
    memory: Memory | None = None,
) -> None:
    """Serve until cancelled; prints the URL (and a generated token, once)."""
    token, generated = token_of(settings)
    try:
        gate = Gate(token)
    except ValueError as exc:
        raise ConfigurationError(f"inspector: {exc}") from exc
    backend = memory or Memory(transport)
    app = build_app(backend, gate)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,  # its lines carry the query string: user ids and searches
        lifespan="on",
        server_header=False,
    )
    server = _Server(config)
    print(f"  inspector    {url_of(settings)}", file=out, flush=True)
    if generated:
        print(f"  inspector token (shown once): {token}", file=out, flush=True)
    try:
        await server.serve()
    except asyncio.CancelledError:
        server.should_exit = True
        raise
    except SystemExit as exc:  # uvicorn's answer to a port it cannot bind
        raise ConfigurationError(
            f"inspector: could not listen on {settings.host}:{settings.port} (in use?)"
        ) from exc
    finally:
        await backend.close()
