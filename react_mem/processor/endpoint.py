"""The process's HTTP endpoint: Prometheus metrics on every path, as prometheus-client
serves them, and ``/healthz``: 200 while the bus is up, 503 with the reason while it is
down (the probe for readiness and liveness; ``/metrics`` keeps answering, so scrapes see
``react_mem_bus_up`` fall to 0)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

HEALTH_PATHS = ("/healthz", "/readyz", "/livez")


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds are not worth a log line each."""


def app(reason: Callable[[], str | None]) -> Callable[..., Iterable[bytes]]:
    metrics = make_wsgi_app()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") in HEALTH_PATHS:
            why = reason()
            body = b"ok\n" if why is None else f"bus down: {why}\n".encode()
            status = "200 OK" if why is None else "503 Service Unavailable"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        return metrics(environ, start_response)  # type: ignore[no-any-return]

    return serve


def serve_http(port: int, reason: Callable[[], str | None]) -> None:
    """Serve on all addresses at ``port`` from a daemon thread (raises OSError if taken)."""
    server = make_server("", port, app(reason), _Server, _QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics-http").start()
