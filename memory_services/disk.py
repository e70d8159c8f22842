"""Room on the disk a memory service keeps its store on: checked before every write.

The embedded store (qdrant-edge) maps its files into memory; when the disk fills under a
mapped write the process dies of SIGBUS, with no log line, and every service of the
process with it. So a service refuses a write while the free space under its store is
below ``min_free_disk_mib``: the caller gets ``disk-full`` naming the directory and the
space left (nothing was written, nothing acknowledged as written: the learner keeps its
trajectory and has it redelivered until space returns, a client may ask again), the refusal is counted, and writes
go through again as soon as space is freed. A service that starts with less than that
stops at once with the same explanation. Reads, deletes and forgetting are never refused
(they free space).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter

from react_mem.errors import ConfigurationError, DiskFull
from react_mem.metrics import per_registry

MIB = 2**20

disk_refusals = per_registry(
    lambda registry: Counter(
        "tg_memory_disk_full_refusals_total",
        "Writes a memory service refused because its store's disk was (nearly) full",
        ["processor"],
        registry=registry,
    )
)


class DiskReserve:
    def __init__(
        self, processor: str, path: Path, min_free_mib: int, registry: CollectorRegistry | None
    ) -> None:
        self.processor, self.path, self.min_free = processor, path, min_free_mib * MIB
        self._refused = disk_refusals(registry).labels(processor=processor)

    def free(self) -> int:
        where = self.path
        while not where.exists() and where != where.parent:  # not made yet: its parent's disk
            where = where.parent
        return shutil.disk_usage(where).free

    def _short(self, free: int) -> str:
        return (
            f"{self.processor}: the disk under {self.path} has {free / MIB:.1f} MiB free, below "
            f"min_free_disk_mib ({self.min_free // MIB} MiB)"
        )

    def check_start(self) -> None:
        if self.min_free and (free := self.free()) < self.min_free:
            raise ConfigurationError(f"{self._short(free)}: free space, or lower the setting")

    def check_write(self) -> None:
        if self.min_free and (free := self.free()) < self.min_free:
            self._refused.inc()
            raise DiskFull(
                f"{self._short(free)}: nothing was written; ask again once space is freed"
            )
