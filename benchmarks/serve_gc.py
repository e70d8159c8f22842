"""A full GC pass in a served process, with the heap frozen after start (what ``serve``
does: ``freezing_heap``) or not: ``react-mem`` runs its command as it would (``serve``,
the embedded broker), and once every processor has started, where ``serve`` freezes the
heap, five full passes are timed (wall / CPU ms) and the process is stopped.

    OMP_NUM_THREADS=1 python benchmarks/serve_gc.py freeze run fact-memory --state-dir DIR
    OMP_NUM_THREADS=1 python benchmarks/serve_gc.py no-freeze run fact-memory --state-dir DIR
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from react_mem import cli

FREEZE = gc.freeze


def timed_passes(mode: str) -> None:
    """Called where ``serve`` freezes the heap (once every processor has started)."""
    if mode == "freeze":
        FREEZE()
    took = []
    for _ in range(5):
        wall, cpu = time.perf_counter(), time.thread_time()
        gc.collect()
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        took.append(f"{wall * 1000:.1f}/{cpu * 1000:.1f}")
    print(f"{mode}: {gc.get_freeze_count():,} objects frozen, {len(gc.get_objects()):,} tracked; "
          f"full passes after start, wall/CPU ms: {', '.join(took)}", flush=True)  # fmt: skip
    os.kill(os.getpid(), signal.SIGINT)  # serve stops as on Ctrl-C


if __name__ == "__main__":
    mode, argv = sys.argv[1], sys.argv[2:]
    if mode not in ("freeze", "no-freeze"):
        sys.exit("usage: serve_gc.py freeze|no-freeze COMMAND [ARGS] (a react-mem command)")
    gc.freeze = lambda: timed_passes(mode)
    sys.exit(cli.main(argv))
