"""End to end through the CLI and the embedded broker, with faults: restarts and kills."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from react_mem.bus.embedded import EmbeddedBroker, running_broker_url
from react_mem.bus.pulsar import PulsarOptions, PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.errors import BusError
from react_mem.schema.ping import PingRequest, PingResponse
from tests.support.ping import answered, flow_file
from tests.support.rabbitmq import cli_bus_args
from tests.support.recording import RecordingProcessor, eventually, settled

pytestmark = pytest.mark.broker
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def react_mem(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "react_mem.cli", *args],
        cwd=REPO,
        env=os.environ | env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The processor's metrics samples, by name and labels."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


async def test_group_cli_serves_and_metrics_are_scraped_over_http(
    broker: EmbeddedBroker, transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    pid = f"ping-{unique}"
    topics = {"request": f"request:tg:p-{unique}", "response": f"response:tg:p-{unique}"}
    group = tmp_path / "group.yaml"
    group.write_text(
        json.dumps(
            {
                "processors": [
                    {
                        "class": "ping",
                        "params": {
                            "id": pid,
                            "flows": str(flow_file(tmp_path, pid, topics)),
                            "concurrency": 2,
                        },
                    }
                ]
            }
        )
    )
    port = free_port()
    bus = cli_bus_args(transport, broker.url)
    proc = react_mem("group", "-c", str(group), *bus, "-P", str(port), "-l", "WARNING")
    client: RequestResponseClient[PingRequest, PingResponse] = RequestResponseClient(
        transport, topics["request"], topics["response"], PingResponse
    )
    await client.start()
    try:
        await answered(client, timeout=30)
        for n in range(5):
            assert (await client.request(PingRequest(message=str(n)))).message == str(n)
        labels = (("consumer", topics["request"]), ("processor", pid), ("status", "ok"))
        # A message is counted once settled, which may come just after its reply is read.
        deadline = time.monotonic() + 10
        while True:
            samples = await asyncio.to_thread(scrape, port)
            if samples.get(("tg_consumer_processing_total", labels), 0) >= 6:
                break
            assert time.monotonic() < deadline, samples
            await asyncio.sleep(0.1)
    finally:
        await client.close()
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=20)[0]
    assert proc.returncode == 0, output
    state = (("consumer", topics["request"]), ("processor", pid), ("tg_consumer_state", "running"))
    assert samples[("tg_consumer_state", state)] == 1
    assert (
        samples[("tg_producer_messages_total", (("processor", pid), ("producer", "response")))] >= 6
    )


def test_invalid_setting_is_refused_with_the_key_named(tmp_path: Path) -> None:
    proc = react_mem(
        "run", "ping", "--concurrency", "0", "--flows", str(tmp_path / "x.yaml"), "--no-metrics"
    )
    output = proc.communicate(timeout=30)[0]
    assert proc.returncode == 2
    assert "'concurrency'" in output and "greater than or equal to 1" in output


def test_invalid_environment_setting_names_the_key() -> None:
    proc = react_mem("run", "ping", "--no-metrics", REACT_MEM_MAX_REDELIVERIES="lots")
    output = proc.communicate(timeout=30)[0]
    assert proc.returncode == 2 and "'max_redeliveries'" in output


def test_embedded_broker_owns_its_directory_and_stops_cleanly(tmp_path: Path) -> None:
    first = EmbeddedBroker(tmp_path)
    first.start()
    try:
        assert running_broker_url(tmp_path) == first.url
        assert (tmp_path / "broker.log").exists()
        with pytest.raises(BusError, match="another process owns"):
            EmbeddedBroker(tmp_path).start()
        process = first._process
        assert process is not None
    finally:
        first.stop()
    assert process.poll() is not None
    assert running_broker_url(tmp_path) is None


async def test_broker_restart_loses_nothing(tmp_path: Path, unique: str) -> None:
    registry = CollectorRegistry()
    port = free_port()
    broker = EmbeddedBroker(tmp_path / "b", port=port)
    broker.start()
    bus = PulsarTransport(PulsarOptions(url=broker.url, connect_timeout=30))
    await bus.connect()
    pid = f"rec-{unique}"
    topics = {"input": f"flow:tg:in-{unique}", "output": f"flow:tg:out-{unique}"}
    settings = RecordingProcessor.Settings.load(
        {"id": pid, "flows": flow_file(tmp_path, pid, topics)}
    )
    processor = RecordingProcessor(settings, bus, registry=registry)
    producer = await bus.producer(Queue.parse(topics["input"]))
    try:
        await processor.start()
        await processor.stop()  # the durable subscription now exists; nobody consumes
        for n in range(5):
            await producer.send(PingRequest(message=f"before-{n}").encode(), {})
        broker.stop()
        broker = EmbeddedBroker(tmp_path / "b", port=port)
        broker.start()
        for n in range(5):  # the same client reconnects by itself
            await producer.send(PingRequest(message=f"after-{n}").encode(), {})
        processor = RecordingProcessor(settings, bus, registry=registry)
        await processor.start()
        await eventually(lambda: len(processor.done) >= 10, timeout=30)
        await settled(processor, registry, topics["input"])  # nothing further may arrive
        assert sorted(processor.done) == sorted(
            [f"before-{n}" for n in range(5)] + [f"after-{n}" for n in range(5)]
        )
    finally:
        await processor.stop()
        await producer.close()
        await bus.close()
        broker.stop()


async def test_killed_processor_loses_nothing(
    broker: EmbeddedBroker,
    transport: PulsarTransport,
    registry: CollectorRegistry,
    tmp_path: Path,
    unique: str,
) -> None:
    pid = f"slow-{unique}"
    topics = {"input": f"flow:tg:in-{unique}", "output": f"flow:tg:out-{unique}"}
    flows_path = flow_file(tmp_path, pid, topics)
    marker = tmp_path / "received"
    proc = react_mem(
        "run",
        "tests.support.slow.SlowProcessor",
        "--id",
        pid,
        "--flows",
        str(flows_path),
        *cli_bus_args(transport, broker.url),
        "--no-metrics",
        SLOW_MARKER=str(marker),
    )
    producer = await transport.producer(Queue.parse(topics["input"]))
    try:
        # The subprocess may still be subscribing: send until one message is in its hands.
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "the processor never received the message"
            await producer.send(PingRequest(message="precious").encode(), {})
            await asyncio.sleep(0.5)
        proc.kill()  # SIGKILL mid-handling: nothing was acknowledged
        proc.wait(timeout=10)
        settings = RecordingProcessor.Settings.load({"id": pid, "flows": flows_path})
        survivor = RecordingProcessor(settings, transport, registry=registry)
        await survivor.start()
        try:
            await eventually(lambda: "precious" in survivor.done, timeout=30)
        finally:
            await survivor.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)  # reaped, its output pipe closed
        await producer.close()


def test_embedded_broker_dies_with_a_killed_owner(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path;"
            "from react_mem.bus.embedded import EmbeddedBroker;"
            "b = EmbeddedBroker(Path(sys.argv[1])); b.start();"
            "print(b._process.pid, flush=True); time.sleep(120)",
            str(tmp_path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    broker_pid = int(owner.stdout.readline())
    owner.kill()
    owner.communicate(timeout=10)  # reaped, its output pipe closed
    deadline = time.monotonic() + 15
    while (
        Path(f"/proc/{broker_pid}").exists()
        and Path(f"/proc/{broker_pid}/stat").read_text().split()[2] != "Z"
    ):
        assert time.monotonic() < deadline, "the broker outlived its owner"
        time.sleep(0.1)
