"""Room on the disk a memory service keeps its store on: checked before every write.

The embedded store (qdrant-edge) maps its files into memory; when the disk fills under a
mapped write the process dies of SIGBUS, with no log line, and every service of the
process with it. So a service refuses a write while the free space under its store is
below ``min_free_disk_mib`` (:class:`react_mem.disk.DiskFloor`): the caller gets
``disk-full`` naming the directory and the space left (nothing was written, nothing
acknowledged as written: the learner keeps its trajectory and has it redelivered until
space returns, a client may ask again), the refusal is counted, and writes go through
again as soon as space is freed. A service that starts with less than that stops at once
with the same explanation. Reads, deletes and forgetting are never refused (they free
space).
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter

from react_mem.disk import MIB, DiskFloor
from react_mem.metrics import per_registry

#: What a memory service's embedded store takes on its first start (its collections and
#: their payload indexes; measured 39-45 MiB per service): a first start needs this on top
#: of ``min_free_disk_mib``.
FRESH_STORE = 48 * MIB

disk_refusals = per_registry(
    lambda registry: Counter(
        "tg_memory_disk_full_refusals_total",
        "Writes a memory service refused because its store's disk was (nearly) full",
        ["processor"],
        registry=registry,
    )
)


class DiskReserve(DiskFloor):
    def __init__(
        self, processor: str, path: Path, min_free_mib: int, registry: CollectorRegistry | None
    ) -> None:
        counter = disk_refusals(registry).labels(processor=processor)
        super().__init__(processor, path, min_free_mib, refused=counter.inc)
