"""The embedded broker dies (kill -9): the stack restarts it and answers again, and its
health endpoint says the bus is down while it is (before, `react-mem up` kept a zombie
broker, reported every consumer running and never answered again)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus import embedded
from react_mem.bus import health as bus_health
from react_mem.bus.embedded import EmbeddedBroker, keep_embedded
from react_mem.bus.health import BusHealth
from react_mem.errors import BusError
from react_mem.processor.endpoint import serve_http
from react_mem.processor.runtime import free_port, serve
from react_mem.processor.settings import BusSettings
from tests.support.openai_server import OpenAIServer
from tests.test_up import ENV, cli, llm

pytestmark = pytest.mark.broker

#: Bounds on a hang, not timing checks.
HANG = 180.0


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    running = OpenAIServer()
    running.reply = llm
    running.start()
    yield running
    running.stop()


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_killed_embedded_broker_is_restarted_and_the_stack_answers_again(
    server: OpenAIServer, tmp_path: Path
) -> None:
    port = free_port()
    up = subprocess.Popen(
        [
            *(sys.executable, "-m", "react_mem.cli", "up", "--llm", "openai"),
            *("--llm-url", server.url, "--llm-model", "double-1"),
            *("--state-dir", str(tmp_path), "-P", str(port), "-l", "WARNING"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
    )
    assert up.stdout is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while not any(line.startswith("ready.") for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            line = up.stdout.readline()
            assert line or up.poll() is None, "".join(lines)
            lines.append(line)
        assert healthz(port) == (200, "ok\n")
        pid_file = tmp_path / "broker" / "broker.pid"
        first = int(pid_file.read_text())
        os.kill(first, signal.SIGKILL)

        deadline = time.monotonic() + HANG
        while not (pid_file.exists() and int(pid_file.read_text()) != first):
            assert time.monotonic() < deadline and up.poll() is None, "broker never restarted"
            time.sleep(0.1)
        asked = cli("ask", "hello again?", "--conversation", "c2", state=tmp_path)
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert "hello from up" in asked.stdout
        assert healthz(port) == (200, "ok\n")
    finally:
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=60)
    assert "embedded broker exited with status -9" in rest, rest
    assert up.returncode == 0, rest


async def test_health_fails_while_the_broker_is_down_and_a_broker_dying_for_good_is_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no restarts allowed, one death is given up on: the state the endpoint serves
    goes down, stays down, and ``lost`` is set (``serve`` then stops with this error)."""
    monkeypatch.setattr(bus_health, "CHECK_INTERVAL", 0.05)
    broker = EmbeddedBroker(tmp_path)
    await asyncio.to_thread(broker.start)
    health = BusHealth(CollectorRegistry())
    port = free_port()
    serve_http(port, lambda: health.reason)
    watcher = asyncio.create_task(keep_embedded(broker, health, max_restarts=0))
    try:
        await asyncio.sleep(0)  # the watcher's first step: it starts from a running broker
        assert health.up
        assert await asyncio.to_thread(healthz, port) == (200, "ok\n")
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGKILL)
        await asyncio.wait_for(health.lost.wait(), HANG)
        status, body = await asyncio.to_thread(healthz, port)
        assert status == 503 and "last status -9" in body
        assert health.error is not None and "giving up" in str(health.error)
    finally:
        watcher.cancel()
        await asyncio.to_thread(broker.stop)


async def test_serve_stops_with_an_error_when_the_broker_is_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So `react-mem up` exits non-zero and its own supervisor can restart it."""
    monkeypatch.setattr(bus_health, "CHECK_INTERVAL", 0.05)
    monkeypatch.setattr(embedded, "MAX_RESTARTS", 0)
    bus = BusSettings.load({"state_dir": str(tmp_path), "metrics": False})

    async def kill_broker(transport: object) -> None:
        os.kill(int((tmp_path / "broker" / "broker.pid").read_text()), signal.SIGKILL)

    with pytest.raises(BusError, match="giving up"):
        await asyncio.wait_for(serve([], bus, ready=kill_broker), HANG)


async def test_a_process_with_no_bus_open_is_not_healthy() -> None:
    bus_health.publish(None)
    assert bus_health.current_reason() == "no bus opened"
