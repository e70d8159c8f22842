"""A test double of an OpenAI-compatible server: real HTTP on localhost, in a thread.

``POST /v1/chat/completions`` answers with :attr:`OpenAIServer.reply` (a function of the
request body), as one JSON body or, for ``"stream": true``, as server-sent events one word
per chunk, a usage chunk when asked for, then ``[DONE]``. :meth:`fail` makes the next
requests fail with a status code, :meth:`cut` breaks the next stream off after some events;
``delay`` holds every answer back; ``hanging`` holds every request, unanswered, until it is
cleared or the server stops. Requests are recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "double-1"


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]


def echo(body: dict[str, Any]) -> str:
    return "echo: " + str(body["messages"][-1]["content"])


class OpenAIServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.reply: Callable[[dict[str, Any]], str] = echo
        self.delay = 0.0
        self._released = threading.Event()
        self._released.set()
        self._stopped = False
        self._failures: list[int] = []
        self._cuts: list[int] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def fail(self, status: int, times: int = 1) -> None:
        """Answer the next ``times`` requests with ``status``."""
        with self._lock:
            self._failures += [status] * times

    @property
    def hanging(self) -> bool:
        return not self._released.is_set()

    @hanging.setter
    def hanging(self, value: bool) -> None:
        if value:
            self._released.clear()
        else:
            self._released.set()

    def cut(self, after: int) -> None:
        """Break the next stream off after ``after`` events, mid-body."""
        with self._lock:
            self._cuts.append(after)

    def _next(self, scripted: list[int]) -> int | None:
        with self._lock:
            return scripted.pop(0) if scripted else None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop listening (again is a no-op); its port then refuses connections."""
        self._stopped = True
        self._released.set()  # held requests end unanswered
        if self._thread.is_alive():
            self._http.shutdown()
        self._http.server_close()


def _chunk(delta: dict[str, Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": None}]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": choices,
        "usage": usage,
    }


def _usage(body: dict[str, Any], text: str) -> dict[str, int]:
    prompt = sum(len(m["content"].split()) for m in body["messages"])
    return {
        "prompt_tokens": prompt,
        "completion_tokens": len(text.split()),
        "total_tokens": prompt + len(text.split()),
    }


def _handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            headers = {k.lower(): v for k, v in self.headers.items()}
            server.requests.append(Recorded(self.path, headers, body))
            server._released.wait()
            if server._stopped:
                return None  # the connection closes with no answer
            time.sleep(server.delay)
            status = server._next(server._failures)
            if status is not None:
                error = {"error": {"message": f"scripted {status}", "type": "server_error"}}
                return self._send(status, "application/json", [json.dumps(error).encode()])
            if self.path != "/v1/chat/completions":
                return self._send(404, "application/json", [b'{"error": {"message": "no"}}'])
            text = server.reply(body)
            if body.get("stream"):
                events = list(_events(body, text))
                cut = server._next(server._cuts)
                if cut is None:
                    return self._send(200, "text/event-stream", events)
                # Promise more than is sent: the client sees the connection drop mid-body.
                length = sum(map(len, events))
                return self._send(200, "text/event-stream", events[:cut], length=length)
            completion = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": _usage(body, text),
            }
            return self._send(200, "application/json", [json.dumps(completion).encode()])

        def _send(
            self,
            status: int,
            content_type: str,
            parts: Iterator[bytes] | list[bytes],
            length: int | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Connection", "close")  # the body ends when the socket closes
            if length is not None:
                self.send_header("Content-Length", str(length))
            self.end_headers()
            for part in parts:
                self.wfile.write(part)
                self.wfile.flush()

    return Handler


def _events(body: dict[str, Any], text: str) -> Iterator[bytes]:
    words = text.split(" ")
    pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
    events = [_chunk({"role": "assistant", "content": ""})]
    events += [_chunk({"content": piece}) for piece in pieces]
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(_chunk({}, _usage(body, text)))
    for event in events:
        yield b"data: " + json.dumps(event).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"
