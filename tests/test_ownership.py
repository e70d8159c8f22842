"""A newcomer's first mistakes, refused at once and clearly: a second owner of a state
directory or an embedded store, a metrics port in use, an OpenAI backend with no URL,
and a processor started with no flows and no config service."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_services.store.edge import EdgeStore
from react_mem import cli
from react_mem.ownership import DirectoryInUse, DirectoryOwner
from react_mem.processor.settings import BusSettings
from tests.support.ping import flow_file

REPO = Path(__file__).resolve().parent.parent
#: The embedded broker, and no OpenAI endpoint or key from the caller's environment.
ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in {"PULSAR_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY"}
    and not k.startswith("REACT_MEM_")
}


def react_mem(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "react_mem.cli", *args],
        cwd=REPO,
        env=ENV | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else is listening on."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_second_owner_is_refused_with_the_owners_pid(tmp_path: Path) -> None:
    owner = DirectoryOwner(tmp_path, "the state directory").take()
    try:
        with pytest.raises(DirectoryInUse, match=rf"pid {os.getpid()}\b") as refused:
            DirectoryOwner(tmp_path, "the state directory").take()
        assert str(tmp_path) in str(refused.value)
    finally:
        owner.release()
    DirectoryOwner(tmp_path, "the state directory").take().release()  # free again


def test_second_up_on_a_state_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    # The first owner is another process, as a running `up` would be.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib; from react_mem.ownership import DirectoryOwner; "
            "owner = DirectoryOwner(pathlib.Path(sys.argv[1]), 'x').take()\n"
            "print('held', flush=True); "
            "sys.stdin.read()",
            str(tmp_path),
        ],
        cwd=REPO,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        second = react_mem("up", "--state-dir", str(tmp_path))
    finally:
        holder.communicate("")
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"pid {holder.pid}" in second.stderr and str(tmp_path) in second.stderr
    assert "Traceback" not in second.stderr and len(second.stderr.splitlines()) == 1
    assert "react-mem up" not in second.stdout  # refused before anything started


async def test_an_embedded_store_has_one_owner(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "store")
    await first.open()
    try:
        with pytest.raises(DirectoryInUse, match=rf"pid {os.getpid()}\b"):
            await EdgeStore(tmp_path / "store").open()
    finally:
        await first.close()
    again = EdgeStore(tmp_path / "store")
    await again.open()  # closing released it
    await again.close()


def test_a_processor_whose_store_is_owned_elsewhere_stops_at_once(tmp_path: Path) -> None:
    # Without the refusal being fatal the processor would restart every few seconds forever
    # (the subprocess timeout would fail this test).
    owner = DirectoryOwner(tmp_path / "memory" / "fact-memory", "the embedded store").take()
    try:
        proc = react_mem(
            "run",
            "fact-memory",
            "--state-dir",
            str(tmp_path),
            "--flows",
            str(flow_file(tmp_path, "fact-memory", {})),
            "--no-metrics",
        )
    finally:
        owner.release()
    assert proc.returncode == 2, proc.stderr
    assert f"the embedded store {tmp_path / 'memory' / 'fact-memory'}" in proc.stderr
    assert f"pid {os.getpid()}" in proc.stderr


def test_metrics_port_in_use_names_the_port_and_the_setting(
    tmp_path: Path, taken_port: int
) -> None:
    proc = react_mem(
        "run",
        "ping",
        "--state-dir",
        str(tmp_path),
        "--flows",
        str(flow_file(tmp_path, "ping", {})),
        "-P",
        str(taken_port),
    )
    assert proc.returncode == 2, proc.stderr
    assert f"port {taken_port}" in proc.stderr
    assert "-P/--metrics-port" in proc.stderr and "REACT_MEM_METRICS_PORT" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_demo_moves_its_metrics_to_a_free_port(
    taken_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(metrics_port=taken_port, settings=None)
    bus = cli._free_metrics_port(args, BusSettings.load({"metrics_port": taken_port}))
    assert bus.metrics_port not in (taken_port, 0)
    assert f"metrics port {taken_port} is in use" in capsys.readouterr().out


def test_up_with_openai_and_no_url_is_refused_naming_the_setting(tmp_path: Path) -> None:
    proc = react_mem("up", "--llm", "openai", "--state-dir", str(tmp_path), "--no-metrics")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--llm-url" in proc.stderr and "OPENAI_BASE_URL" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.broker
def test_no_flows_and_no_config_service_is_said_plainly(tmp_path: Path) -> None:
    """The wait is named at the first unanswered config request; each failed fetch is one
    line, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "react_mem.cli", "run", "ping", "--state-dir", str(tmp_path)],
        cwd=REPO,
        env=ENV | {"REACT_MEM_CONFIG_TIMEOUT": "1", "REACT_MEM_METRICS": "false"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while not any("config fetch failed" in line for line in lines):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    out = "".join(lines)
    waiting = [line for line in lines if "no flows yet" in line]
    assert len(waiting) == 1, out
    assert "request:tg:config" in waiting[0] and "--flows" in waiting[0]
    assert "Traceback" not in out + rest
