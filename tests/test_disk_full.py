"""A full disk under a memory service's store (issue 26, finding 2): every write is
refused with a clear error while the free space is below ``min_free_disk_mib`` (nothing
acknowledged that was not written), reads go on, writes succeed again once space is
freed, and a service started on a full disk stops at once with the reason: never the
SIGBUS that killed the whole stack with no log line.

Real broker (both where installed) and fact-memory's real store on a small tmpfs mounted
for the test (needs root; skipped where mounting is not allowed).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from memory_services.facts.service import FactMemoryProcessor
from react_mem.bus.transport import Transport
from react_mem.errors import ConfigurationError
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from tests.support.embedder import HashingEmbedder
from tests.support.memory_services import MovableClock, serving, topics
from tests.support.recording import eventually

pytestmark = pytest.mark.broker

MIB = 2**20


@contextlib.contextmanager
def small_disk(path: Path, mib: int) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path, leave_mib: int) -> Path:
    """A file taking all but ``leave_mib`` of ``disk``."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with filler.open("wb") as out:
        out.write(b"\0" * max(free - leave_mib * MIB, 0))
    return filler


def fact(n: int) -> FactInput:
    return FactInput(content=f"Ada keeps receipt number {n} in the green box.")


async def test_a_full_disk_refuses_writes_clearly_and_recovers_when_space_returns(
    transport: Transport,
    tmp_path: Path,
    unique: str,
    registry: CollectorRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with small_disk(tmp_path / "disk", 96) as disk:  # its first files take 40-45 MiB
        async with serving(
            FactMemoryProcessor,
            FactResponse,
            transport,
            pid=f"fact-memory-{unique}",
            queues={"ws": topics("fact-memory", unique, "ws")},
            data_dir=disk / "facts",
            registry=registry,
            clock=MovableClock(),
            embedder=HashingEmbedder(),
            min_free_disk_mib=16,
            sweep_interval=0.05,
            metrics=False,
        ) as svc:

            async def store(n: int) -> FactResponse:
                return await svc.ask(
                    FactRequest(operation="store", user="ada", facts=[fact(n)]), "ws"
                )

            assert (await store(1)).error is None
            filler = fill(disk, leave_mib=8)
            refused = await store(2)
            listed = await svc.ask(FactRequest(operation="list", user="ada"), "ws")
            # The background sweep writes too (consolidation): it waits meanwhile.
            await eventually(lambda: "background sweeps wait" in caplog.text, timeout=30)
            filler.unlink()
            again = await store(3)
            after = await svc.ask(FactRequest(operation="list", user="ada"), "ws")
            pid = svc.processor.id
    assert refused.error is not None and refused.error.type == "disk-full"
    assert "MiB free" in refused.error.message and "min_free_disk_mib" in refused.error.message
    assert listed.error is None and len(listed.facts) == 1  # reads go on
    assert again.error is None
    assert sorted(f.content for f in after.facts) == sorted(fact(n).content for n in (1, 3))
    refusals = registry.get_sample_value("tg_memory_disk_full_refusals_total", {"processor": pid})
    assert refusals == 1


async def test_a_service_started_on_a_full_disk_stops_with_the_reason(
    transport: Transport, tmp_path: Path, unique: str, registry: CollectorRegistry
) -> None:
    with small_disk(tmp_path / "disk", 32) as disk:
        fill(disk, leave_mib=4)
        with pytest.raises(ConfigurationError, match="min_free_disk_mib"):
            async with serving(
                FactMemoryProcessor,
                FactResponse,
                transport,
                pid=f"fact-memory-{unique}",
                queues={"ws": topics("fact-memory", unique, "ws")},
                data_dir=disk / "facts",
                registry=registry,
                clock=MovableClock(),
                embedder=HashingEmbedder(),
                min_free_disk_mib=16,
                metrics=False,
            ):
                pass
