"""The embedder's ONNX Runtime session and the C heap: what stays resident as texts of many
lengths go through it, per setting: ONNX Runtime's CPU memory arena (its default) or none,
and glibc's arenas as they are (one per thread), one for every thread (what ``serve`` sets:
``react_mem.processor.runtime.one_malloc_arena``) or its block thresholds fixed at
``--block`` MiB (blocks from that size up mapped and unmapped each time, the alternative
measured).

Each setting runs in a fresh process: the same texts (random lengths up to past the
model's 256-token window, a fixed seed) from ``--lanes`` threads at once, as the embedder's
lanes run them; after each round glibc's ``malloc_trim`` (as the services do after their
sweeps), then what malloc has handed out and not had back (``mallinfo2``) and the heap's
resident memory (``RssAnon``), each against the model just loaded. Then the CPU per text
(``time.thread_time``, medians) at a few lengths, one thread. Settings run in turn,
``--passes`` times over, so that a busy machine weighs on each alike.

    OMP_NUM_THREADS=1 python benchmarks/onnx_heap.py
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soak_trace import _libc, _malloc_used, malloc_trim

from react_mem.embedding import onnx
from react_mem.embedding.sentence import model_path
from react_mem.processor.runtime import one_malloc_arena

PHRASE = (
    "the a weekend trip with my parrot to Lisbon in spring booked hotel near river "
    "remember that Anna prefers window seats and vegetarian food 2026 invoice 4711"
)
WORDS = PHRASE.split(" ")
#: name -> (ONNX Runtime's CPU arena, glibc: "" as it is, "fixed" thresholds, "one" arena).
SETTINGS = {
    "arena (before)": (True, ""),
    "no arena": (False, ""),
    "no arena, fixed thresholds": (False, "fixed"),
    "no arena, one malloc arena (now)": (False, "one"),
}
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
LENGTHS = (6, 24, 80, 250)


def anon_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def child(setting: str, args: argparse.Namespace) -> None:
    """One setting, in this (fresh) process: memory rounds, then CPU per text."""
    arena, fixed = SETTINGS[setting]
    if fixed == "fixed":
        block = int(args.block * 2**20)
        _libc.mallopt(_M_MMAP_THRESHOLD, block)
        _libc.mallopt(_M_TRIM_THRESHOLD, 2 * block)
    elif fixed == "one":
        one_malloc_arena()
    path = model_path("all-MiniLM-L6-v2")
    model = onnx.OnnxEncoder(path, onnx.graph(path, quantized=True), threads=1, arena=arena)
    malloc_trim()
    used, anon = _malloc_used(), anon_mib()
    rng = random.Random(7)
    rows = []
    wall, cpu_all = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(args.lanes) as lanes:
        for _ in range(args.rounds):
            texts = [text(rng, rng.randint(1, 300)) for _ in range(args.texts)]
            list(lanes.map(lambda t: model.encode([t]), texts))
            malloc_trim()
            rows.append(f"{_malloc_used() - used:+.1f}/{anon_mib() - anon:+.0f}")
    wall, cpu_all = time.perf_counter() - wall, time.process_time() - cpu_all
    cpu = []
    for words in LENGTHS:
        took = []
        for t in [text(rng, words) for _ in range(args.cpu_runs)]:
            started = time.thread_time()
            model.encode([t])
            took.append((time.thread_time() - started) * 1000)
        cpu.append(f"{statistics.median(took):.2f}")
    print(f"  {setting}: malloc in use / anon RSS after each round of {args.texts} texts "
          f"{', '.join(rows)} MiB ({wall:.0f} s, CPU {cpu_all:.0f} s); CPU ms a text "
          f"at {'/'.join(map(str, LENGTHS))} words {' / '.join(cpu)}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--texts", type=int, default=200, help="texts a round")
    parser.add_argument("--lanes", type=int, default=3, help="threads running texts at once")
    parser.add_argument("--cpu-runs", type=int, default=30, help="texts per length")
    parser.add_argument("--passes", type=int, default=2, help="times over every setting")
    parser.add_argument("--block", type=float, default=1.0, help="fixed thresholds: MiB")
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    print(f"load average {os.getloadavg()[0]:.2f}; {vars(args)}", flush=True)
    for n in range(args.passes):
        print(f"pass {n + 1}:", flush=True)
        for setting in args.settings:
            command = [sys.executable, __file__, "--child", setting]
            for name in ("rounds", "texts", "lanes", "cpu_runs", "block"):
                command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
            subprocess.run(command, check=True)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
