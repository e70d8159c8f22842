"""`react-mem up` as a user runs it: the whole stack in one process on the embedded broker,
an OpenAI-compatible LLM (a real HTTP test double), then `ask` and `memory` against it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_mem.processor.runtime import free_port
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.broker

ENV = {k: v for k, v in os.environ.items() if k != "PULSAR_HOST"}  # the embedded broker
TOKEN = "up-inspector-token-0123456789"


def llm(body: dict[str, Any]) -> str:
    system = str(body["messages"][0]["content"])
    if system.startswith("You are a helpful agent"):  # the stack asks for JSON decisions
        return json.dumps({"thought": "greet", "action": "final-answer", "answer": "hello from up"})
    if "curate the long-term memory" in system:
        return json.dumps({"facts": []})
    if "running summary" in system:
        return json.dumps({"summary": "The user said hello."})
    return json.dumps({"lessons": []})


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    running = OpenAIServer()
    running.reply = llm
    running.start()
    yield running
    running.stop()


def cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "react_mem.cli", *args, "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        check=False,
    )


def test_up_serves_the_stack_until_interrupted(server: OpenAIServer, tmp_path: Path) -> None:
    port = free_port()
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "react_mem.cli",
            "up",
            "--llm",
            "openai",
            "--llm-url",
            server.url,
            "--llm-model",
            "double-1",
            "--state-dir",
            str(tmp_path),
            "--no-metrics",
            "-l",
            "WARNING",
            "--inspector-port",
            str(port),
            "--inspector-token",
            TOKEN,
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
        out = "".join(lines)
        assert "request:tg:agent:default:default -> response:tg:agent:default:default" in out
        for pid in ("agent-mem", "memory-learner", "fact-memory", "playbook-memory"):
            assert f"started {pid}" in out

        second = cli("up", "--no-metrics", state=tmp_path)  # one owner per state directory
        assert second.returncode == 2 and f"pid {up.pid}" in second.stderr, second.stderr

        asked = cli("ask", "hello?", "--conversation", "c1", state=tmp_path)
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert "hello from up" in asked.stdout

        shown = cli("memory", "conversation", "show", "c1", state=tmp_path)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "hello?" in shown.stdout and "hello from up" in shown.stdout

        # The inspector runs beside it (issue 27): its URL printed, its pages behind the token.
        assert f"inspector    http://localhost:{port}/" in out
        inspector = f"http://127.0.0.1:{port}/conversations"
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(inspector, timeout=30)
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        with urllib.request.urlopen(urllib.request.Request(inspector, headers=bearer)) as page:
            assert "c1" in page.read().decode()
    finally:
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=60)
    assert up.returncode == 0, rest
    assert "stopped cleanly" in rest
