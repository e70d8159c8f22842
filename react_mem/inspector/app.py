"""The inspector's web application: routes, the gate in front of them, error pages.

Nothing but the login page and the static files is served without the token. The server's
log gets the method, the route's path (never its query: it holds user ids and searches),
the status and the time; never a page, a form or an error's text.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from react_mem.errors import BadRequest, ReactMemError, ServiceError, ServiceTimeout
from react_mem.inspector.audit_trail import AuditTrail
from react_mem.inspector.auth import COOKIE, Gate
from react_mem.inspector.backend import Memory, Where
from react_mem.inspector.views import admin, context, facts, playbook, records
from react_mem.inspector.views.common import owner_of, render

logger = logging.getLogger("react_mem.inspector")
STATIC = Path(__file__).resolve().parent / "static"
OPEN = ("/login", "/static/")
HEADERS = {
    # Scripts and styles from this site only (htmx is served from it, no inline script).
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'; "
    "base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class Guard(BaseHTTPMiddleware):
    """The token gate, the security headers and the one log line per request."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        started = time.perf_counter()
        response = await self._gated(request, call_next)
        response.headers.update(HEADERS)
        took = (time.perf_counter() - started) * 1000
        logger.info(
            "%s %s %d %.1f ms", request.method, request.url.path, response.status_code, took
        )
        return response

    async def _gated(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        gate: Gate = request.app.state.gate
        request.state.session = None
        path = request.url.path
        if path.startswith(OPEN) or path == "/login":
            return await call_next(request)
        if gate.bearer_ok(request.headers.get("authorization")):
            await _watch(request)
            return await call_next(request)
        session = gate.session(request.cookies.get(COOKIE))
        if session is not None:
            request.state.session = session
            await _watch(request)
            return await call_next(request)
        if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            query = request.url.query
            after = f"{path}?{query}" if query else path
            return render(request, "login.html", 401, error="", after=after)
        return PlainTextResponse("the inspector's token is required", status_code=401)


async def _watch(request: Request) -> None:
    """Read the audit queue of the flow a page names from now on: on RabbitMQ a queue holds
    only what arrives after it is first subscribed, so the inspector subscribes early."""
    try:
        where = owner_of(request.query_params).where
    except HTTPException:
        return  # the view answers the bad parameter
    trail: AuditTrail = request.app.state.trail
    try:
        await trail.watch(where)
    except ReactMemError as exc:  # the page can still be served; the log view says less
        logger.warning("audit queue not read: %s", type(exc).__name__)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "error"
    return render(request, "error.html", status, message=detail)


async def _memory_error(request: Request, exc: Exception) -> Response:
    """A service's refusal or silence as a page; the log names only its kind."""
    if isinstance(exc, BadRequest):
        status = 400
    elif isinstance(exc, ServiceTimeout):
        status = 504
    elif isinstance(exc, ServiceError):
        status = 404 if exc.type == "not-found" else 502
    else:
        status = 502
    logger.warning("%s %s: %s", request.method, request.url.path, type(exc).__name__)
    return render(request, "error.html", status, message=str(exc))


def routes() -> list[BaseRoute]:
    return [
        *admin.ROUTES,
        *facts.ROUTES,
        *records.ROUTES,
        *playbook.ROUTES,
        *context.ROUTES,
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


def build_app(memory: Memory, gate: Gate) -> Starlette:
    """The application over ``memory``; the caller starts and closes the bus around it."""
    trail = AuditTrail(memory)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            await trail.watch(Where())  # the default flow's log, from the start
        except ReactMemError as exc:
            logger.warning("audit queue not read: %s", type(exc).__name__)
        try:
            yield
        finally:
            await trail.close()

    app = Starlette(
        routes=routes(),
        middleware=[Middleware(Guard)],
        exception_handlers={HTTPException: _http_error, ReactMemError: _memory_error},
        lifespan=lifespan,
    )
    app.state.memory, app.state.gate, app.state.trail = memory, gate, trail
    return app
