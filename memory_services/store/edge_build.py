"""Indexing an edge shard off the serving path: a child process builds an indexed copy.

The engine builds HNSW holding the GIL for the whole ``optimize()`` (measured: a ticker thread
stops for all 8.6 s of a 20k-point run), so no thread can keep the process serving meanwhile.
Instead :class:`~memory_services.store.edge.EdgeStore` streams the live shard's points, one
scroll page at a time with its event loop free in between, to ``python -m
memory_services.store.edge_build``, which writes them into a new shard directory, indexes it
and exits. The store records the ids it writes meanwhile; at the swap it opens the new shard,
copies those ids' current state across (:func:`catch_up`, idempotent, so a page exported
before or after a write needs no care), names it live (:func:`set_live`) and deletes the old.

Layout: a collection's live shard is ``<root>/<name>`` until its first swap, then
``<root>/<name>@<n>``, named by the file ``<root>/<name>@live`` (replaced atomically). '@' is
not allowed in collection names, so nothing else collides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import qdrant_edge as qe

from memory_services.store import lexical

#: Payload index kinds by name (kept as names: they cross the process boundary as text).
_SCHEMAS: dict[str, Any] = {
    "keyword": qe.PayloadSchemaType.Keyword,
    "integer": qe.PayloadSchemaType.Integer,
    "float": qe.PayloadSchemaType.Float,
    "bool": qe.PayloadSchemaType.Bool,
}
TENANT = "tenant"  # a keyword index that lays out optimised segments by its value
_LIVE = "@live"
#: What the file of a shard generation's changed points (:mod:`.edge_changes`) adds to its name.
CHANGED = ".changed"


def config(size: int, *, with_terms: bool = True) -> qe.EdgeConfig:
    """A shard of ``size``-d cosine vectors. Vectors and payloads are ``Cold``: mapped files
    read as searches touch them. The engine's default for vectors (``Cached``) reads every
    vector file whole into the process when a shard opens (64 MiB resident per shard on a
    restart, with 35 MiB of vectors), on top of the pages searches touch. The lexical
    vector's index stays in memory (a few bytes per term of a record)."""
    vectors = qe.EdgeVectorParams(size=size, distance=qe.Distance.Cosine, memory=qe.Memory.Cold)
    idf = qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)
    terms = {lexical.VECTOR: idf} if with_terms else None
    return qe.EdgeConfig(vectors=vectors, sparse_vectors=terms, payload_memory=qe.Memory.Cold)


def index_fields(shard: qe.EdgeShard, wanted: Mapping[str, str]) -> int:
    """Create the payload indexes ``wanted`` (field -> kind) that the shard lacks; how many."""
    present, created = set(shard.info().payload_schema), 0
    for key, kind in wanted.items():
        if key not in present:
            schema = qe.KeywordIndexParams(is_tenant=True) if kind == TENANT else _SCHEMAS[kind]
            shard.update(qe.UpdateOperation.create_field_index(key, schema))
            created += 1
    return created


# -- generations --------------------------------------------------------------------------
def live_path(root: Path, name: str) -> Path:
    pointer = root / f"{name}{_LIVE}"
    if pointer.is_file():
        return root / pointer.read_text().strip()
    return root / name


def next_path(root: Path, name: str) -> Path:
    live = live_path(root, name).name
    generation = int(live.rpartition("@")[2]) + 1 if "@" in live else 1
    return root / f"{name}@{generation}"


def stage_live(root: Path, name: str, path: Path) -> None:
    """Write and sync a pointer naming ``path`` beside the collection's live one (in a worker
    thread: fsync releases the GIL); :func:`set_live` puts it in place."""
    with (root / f"{name}{_LIVE}.tmp").open("w") as out:
        out.write(path.name)
        out.flush()
        os.fsync(out.fileno())


def set_live(root: Path, name: str) -> None:
    """Make the staged shard the collection's (a rename: a crash leaves the old or the new);
    durable against a power loss once :func:`sync_dir` of ``root`` returns."""
    (root / f"{name}{_LIVE}.tmp").replace(root / f"{name}{_LIVE}")


def sync_dir(root: Path) -> None:
    directory = os.open(root, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def sync_files(path: Path) -> None:
    """Write back the dirty pages of every file of the shard at ``path`` and sync them (in a
    worker thread: ``os.fsync`` releases the GIL). The engine's close flushes, syncing each
    mapped file holding the GIL, and a sync first writes back whatever of its file is dirty:
    after this, the close's syncs find only what its own flush wrote."""
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):  # gone meanwhile: nothing to write back
                descriptor = os.open(os.path.join(folder, name), os.O_RDONLY)
                try:
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)


def remove_stale(root: Path, name: str) -> None:
    """Delete the collection's shard directories other than the live one (old generations,
    builds a crash interrupted), and their counts of changed points; call it while holding
    the live shard."""
    live = live_path(root, name)
    for path in [root / name, *root.glob(f"{name}@*")]:
        if path != live and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
    for path in [root / f"{name}{CHANGED}", *root.glob(f"{name}@*{CHANGED}")]:
        if path.name != f"{live.name}{CHANGED}":
            path.unlink(missing_ok=True)


def warm(path: Path) -> int:
    """Read the files of the shard at ``path`` that opening it reads (its log, indexes, id
    tracker and flags: all but the vector and payload storage, which searches read as they
    need), so that opening finds them in the page cache; the bytes read. Python's file reads
    release the GIL: run in a worker thread, the loop serves meanwhile, where the engine's
    open would hold it for every disk read (measured on a 20k-point shard whose files were
    out of the page cache: open 112-277 ms, 36-50 ms after this)."""
    read, buffer = 0, bytearray(1 << 20)
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = [d for d in subfolders if d not in _READ_AS_NEEDED]
        for name in names:
            # Holes too (the engine preallocates 32 MiB log and storage pages): opening maps
            # them, and a hole in the page cache costs it less (34 against 46 ms CPU).
            with contextlib.suppress(OSError), open(os.path.join(folder, name), "rb") as file:
                while count := file.readinto(buffer):
                    read += count
    return read


def load(path: Path) -> qe.EdgeShard:
    """Open a built shard (holding the GIL throughout: :func:`warm` it first)."""
    return qe.EdgeShard.load(str(path))


#: A shard's folders that opening it does not read whole (mapped, read as searches need).
_READ_AS_NEEDED = frozenset({"vector_storage", "payload_storage"})


# -- the build ------------------------------------------------------------------------------
#: Ids, payloads, and vectors: the dense one, and the lexical one as (indices, values) or None.
Page = tuple[list[str], list[dict[str, Any]], list[tuple[list[float], lexical.Sparse | None]]]


def _portable(vector: Any) -> tuple[list[float], lexical.Sparse | None]:
    if not isinstance(vector, dict):
        return vector, None
    terms = vector.get(lexical.VECTOR)
    return vector[""], None if terms is None else (list(terms.indices), list(terms.values))


def _native(vector: tuple[list[float], lexical.Sparse | None]) -> Any:
    dense, terms = vector
    return dense if terms is None else {"": dense, lexical.VECTOR: qe.SparseVector(*terms)}


def export_page(shard: qe.EdgeShard, offset: Any, limit: int) -> tuple[bytes, Any, int]:
    """One page of the shard (every point, vectors and payloads) as bytes for the builder,
    the next offset (None at the end) and its point count."""
    request = qe.ScrollRequest(offset=offset, limit=limit, with_payload=True, with_vector=True)
    records, following = shard.scroll(request)
    page: Page = (
        [str(r.id) for r in records],
        [r.payload or {} for r in records],
        [_portable(r.vector) for r in records],
    )
    return pickle.dumps(page, protocol=pickle.HIGHEST_PROTOCOL), following, len(records)


def catch_up(old: qe.EdgeShard, new: qe.EdgeShard, ids: list[str]) -> None:
    """Make the points ``ids`` in ``new`` what they are in ``old`` (present or absent)."""
    found = old.retrieve(ids, with_payload=True, with_vector=True)  # type: ignore[arg-type]
    if found:
        points = [qe.Point(r.id, r.vector, r.payload or {}) for r in found]  # type: ignore[arg-type]
        new.update(qe.UpdateOperation.upsert_points(points))
    present = {str(r.id) for r in found}
    if gone := [i for i in ids if i not in present]:
        new.update(qe.UpdateOperation.delete_points(gone))  # type: ignore[arg-type]


#: Whether a build starts its shard's log afresh (:func:`fresh_log`); False only to compare
#: with the behaviour before (``benchmarks/loop_stall.py``).
FRESH_LOG = True


async def spawn(path: Path, size: int, wanted: Mapping[str, str]) -> asyncio.subprocess.Process:
    """Start a builder of an indexed shard at ``path``; write pages to its stdin, then close
    it and await :func:`finished`."""
    fields = ",".join(f"{key}={kind}" for key, kind in wanted.items())
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", __name__, str(path), str(size), fields, str(int(FRESH_LOG)),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finished(proc: asyncio.subprocess.Process) -> bool:
    """Wait for a builder; True if it indexed anything. Raises RuntimeError if it failed."""
    assert proc.stdin is not None
    proc.stdin.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await proc.stdin.wait_closed()
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the index builder exited with {proc.returncode}")
    return out.strip()[-1:] == b"1"


def _pages(stream: IO[bytes]) -> Iterator[Page]:
    while True:
        try:
            page: Page = pickle.load(stream)  # written by our own parent process
        except EOFError:
            return
        yield page


def build(
    path: Path, size: int, wanted: Mapping[str, str], stream: IO[bytes], *, fresh: bool = True
) -> bool:
    """The builder's work: a new shard at ``path`` from the pages on ``stream``, indexed, and
    (``fresh``) its log started afresh (:func:`fresh_log`)."""
    shard = qe.EdgeShard.create(str(path), config(size))
    try:
        operations = index_fields(shard, wanted)
        for ids, payloads, vectors in _pages(stream):
            points = [
                qe.Point(i, _native(v), p) for i, v, p in zip(ids, vectors, payloads, strict=True)
            ]
            shard.update(qe.UpdateOperation.upsert_points(points))
            operations += 1
        indexed = shard.optimize()
    finally:
        shard.flush()
        shard.close()
    if fresh:
        fresh_log(path, operations)
    return indexed


def fresh_log(path: Path, operations: int) -> None:
    """Replace the log of the built, flushed and closed shard at ``path`` with an empty one.

    The build wrote every point through the shard's log (42 MiB at 20k points), which the
    serving process's open would read whole and check, holding the GIL: a third of its CPU.
    The segments hold all of it once the shard is closed, so the log is not needed. But the
    engine numbers its operations by their place in the log, and skips an update to a point
    (or a segment) whose version is not below the update's number: an empty log would
    restart at 0, and every update to a point the build wrote would be dropped until the
    numbers passed the build's. So the new log is first carried past them with empty
    deletes (each one numbered entry of a few bytes)."""
    shutil.rmtree(path / "wal")
    shard = qe.EdgeShard.load(str(path))
    try:
        for _ in range(max(operations, _version(path) + 1)):
            shard.update(qe.UpdateOperation.delete_points([]))
    finally:
        shard.close()  # which syncs the new log's files
    sync_dir(path)  # its directory replaced: durable before the swap names this shard live


def _version(path: Path) -> int:
    """The highest operation number the shard's segments record (-1 if none can be read):
    a check on the count of the build's operations, which should match it."""
    found = -1
    for meta in path.glob("segments/*/segment.json"):
        with contextlib.suppress(OSError, ValueError, TypeError):
            found = max(found, int(json.loads(meta.read_text()).get("version") or 0))
    return found


def main(argv: list[str]) -> int:
    path, size, fields = Path(argv[0]), int(argv[1]), argv[2]
    fresh = argv[3:4] != ["0"]
    wanted = dict(field.split("=", 1) for field in fields.split(",") if field)
    with contextlib.suppress(OSError):
        # The serving process comes first on shared cores: a real-time policy inherited
        # from it (``chrt`` in a benchmark) is dropped too, or the build's threads would
        # starve the process serving beside it for seconds.
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    with contextlib.suppress(OSError):
        os.nice(10)
    indexed = build(path, size, wanted, sys.stdin.buffer, fresh=fresh)
    sys.stdout.write("1" if indexed else "0")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
