"""`react-mem up` with its state on a small disk (issue 26, finding 2). Before, the whole
stack died of SIGBUS (exit 135, no log line) when started on a small filesystem, and within
a second when the disk filled at run time. Now a disk too small to start on is refused at
once with the space it needs; a disk that fills at run time refuses each write with a clear
error (nothing acknowledged that was not written), the process keeps running, and writes
resume when space is freed.

The real stack in its own process on the embedded broker, an OpenAI-compatible test
server as its LLM, the state directory on a tmpfs mounted for the test (needs root).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from react_mem.processor.runtime import free_port
from tests.support.openai_server import OpenAIServer
from tests.test_broker_death import healthz
from tests.test_disk_full import fill, small_disk
from tests.test_up import ENV, cli, llm

pytestmark = pytest.mark.broker

#: Bounds on a hang, not timing checks.
START = 240.0


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    running = OpenAIServer()
    running.reply = llm
    running.start()
    yield running
    running.stop()


def up(server: OpenAIServer, state: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "react_mem.cli", "up", "--llm", "openai"),
            *("--llm-url", server.url, "--llm-model", "double-1", "--no-inspector"),
            *("--state-dir", str(state), "-P", str(port), "-l", "WARNING"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
    )


def test_up_on_a_disk_too_small_to_start_on_stops_at_once_saying_what_it_needs(
    server: OpenAIServer, tmp_path: Path
) -> None:
    with small_disk(tmp_path / "state", 96) as disk:
        stack = up(server, disk, free_port())
        out, _ = stack.communicate(timeout=START)
    assert stack.returncode == 2, out  # not 135: no SIGBUS
    assert "not enough disk space to start" in out and str(disk) in out
    assert "fact-memory" in out and "min_free_disk_mib" in out and "MiB" in out
    assert "Fatal Python error" not in out


def test_a_disk_filling_at_run_time_refuses_each_write_and_writes_resume_when_space_returns(
    server: OpenAIServer, tmp_path: Path
) -> None:
    port = free_port()
    with small_disk(tmp_path / "state", 400) as disk:
        stack = up(server, disk, port)
        assert stack.stdout is not None
        lines: list[str] = []
        try:
            deadline = time.monotonic() + START
            while not any(line.startswith("ready.") for line in lines):
                assert time.monotonic() < deadline, "".join(lines)
                line = stack.stdout.readline()
                assert line or stack.poll() is None, "".join(lines)
                lines.append(line)
            before = cli("ask", "first question", "--conversation", "c1", state=disk)
            assert before.returncode == 0, before.stdout + before.stderr

            fill(disk, leave_mib=8)
            refused = cli("ask", "second question", "--conversation", "c1", state=disk)
            status, body = healthz(port)
            _fill_rest(disk)  # every byte: nothing of the stack writes there any more
            time.sleep(2)
            alive = stack.poll() is None
            for extra in disk.glob("filler*"):
                extra.unlink()

            deadline = time.monotonic() + START
            while healthz(port)[0] != 200:
                assert time.monotonic() < deadline and stack.poll() is None, "no recovery"
                time.sleep(0.2)
            after = cli("ask", "third question", "--conversation", "c1", state=disk)
            shown = cli("memory", "conversation", "show", "c1", state=disk)
        finally:
            stack.send_signal(signal.SIGINT)
            rest, _ = stack.communicate(timeout=60)
    assert refused.returncode != 0
    said = refused.stdout + refused.stderr
    assert "disk" in said and "MiB free" in said, said  # the reason, not a timeout
    assert status == 503 and "broker_min_free_disk_mib" in body
    assert alive, rest
    assert after.returncode == 0, after.stdout + after.stderr
    assert "first question" in shown.stdout and "third question" in shown.stdout
    assert "second question" not in shown.stdout  # refused, so not kept either
    assert "Fatal Python error" not in rest and stack.returncode == 0, rest
    assert "restarted after its disk had filled" in rest


def test_a_fatal_signal_leaves_where_it_struck_in_the_log(tmp_path: Path) -> None:
    """SIGBUS (what a mapped write to a full disk raises) no longer ends a process with an
    exit status alone: ``faulthandler`` writes where each thread was."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "react_mem.cli", "run", "ping", "--no-metrics"),
            *("--state-dir", str(tmp_path), "-l", "INFO"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        while not any("ping started" in line for line in lines):
            line = process.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        process.send_signal(signal.SIGBUS)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == -signal.SIGBUS
    assert "Fatal Python error: Bus error" in rest and "most recent call first" in rest


def _fill_rest(disk: Path) -> None:
    """Take every byte left, in a second file (the first one stays)."""
    block = b"\0" * 2**20
    with contextlib.suppress(OSError), (disk / "filler-rest").open("wb") as out:
        while True:  # until the disk is full: what this is for
            out.write(block)
            out.flush()
