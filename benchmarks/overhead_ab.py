"""The agent's overhead per ask at two commits, side by side: ``agent_throughput.py
--callers 1`` run alternately on this tree and on ``--base`` (a git ref, unpacked with
``git archive`` into a temporary directory, this tree's benchmark scripts copied in so both
are measured alike), in ABBA order, each run its own process. ``--new REF`` measures that
commit instead of this tree (which can then change meanwhile).

Prints every run's overhead p50, latency p50 and event-loop CPU per ask with the load
average at its start, then the medians of each side and their ratio (this tree / base). On
a shared machine the load moves between runs; the alternation spreads it over both sides.

    OMP_NUM_THREADS=1 python benchmarks/overhead_ab.py --base HEAD~3
    OMP_NUM_THREADS=1 python benchmarks/overhead_ab.py --base main --rounds 4 -- --no-learner
    OMP_NUM_THREADS=1 python benchmarks/overhead_ab.py --base HEAD~3 -- --phases
    OMP_NUM_THREADS=1 python benchmarks/overhead_ab.py --layouts -- --phases

``--layouts`` compares the two layouts of ``agent_throughput.py`` on one tree instead:
``--layout one`` (the whole stack in one process) and ``split`` (the agent and the learner
in one process, everything else in others, as deployed), alternated the same way.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = (
    "benchmarks/agent_throughput.py",
    "benchmarks/ask_phases.py",
    "benchmarks/agent_load.py",
    "benchmarks/split_layout.py",
    "tests/support/agent_stack.py",  # the split layout's seam (``neighbours``)
)
FIGURES = {
    "overhead p50": re.compile(r"agent overhead per ask .*?: p50 ([\d.]+) ms"),
    "latency p50": re.compile(r"callers: .*? p50 +([\d.]+) ms"),
    "loop CPU/ask": re.compile(r"event-loop thread ([\d.]+) ms"),
    "process CPU/ask": re.compile(r"process ([\d.]+) ms, event-loop"),
    "all processes CPU/ask": re.compile(r"all processes ([\d.]+)$", re.M),
    # With --phases (ask_phases.py): the agent's own loop CPU, and some phases' medians.
    "agent loop CPU/ask": re.compile(r"^ +agent \(request\) +([\d.]+)$", re.M),
    "recall (wall)": re.compile(r"^ +recall: all sources +([\d.]+)$", re.M),
    "turn append (wall)": re.compile(r"^ +turn append +([\d.]+)$", re.M),
    "recall to LLM (wall)": re.compile(r"^ +recall to LLM call +([\d.]+)$", re.M),
    "embedding (wall)": re.compile(r"^ +recall: embedding +([\d.]+)$", re.M),
    "to the agent (wall)": re.compile(r"^ +to the agent +([\d.]+)$", re.M),
    "LLM to hand-off (wall)": re.compile(r"^ +LLM to learning hand-off +([\d.]+)$", re.M),
    "LLM to answer (wall)": re.compile(r"^ +LLM to answer, in all +([\d.]+)$", re.M),
    "answer sent (wall)": re.compile(r"^ +answer sent +([\d.]+)$", re.M),
    "answer to caller (wall)": re.compile(r"^ +answer to the caller +([\d.]+)$", re.M),
}


def unpack(ref: str, into: Path) -> Path:
    """The tree at ``ref``, with this tree's benchmark scripts."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for name in SCRIPTS:
        shutil.copy(ROOT / name, into / name)
    return into


def run(tree: Path, seconds: float, extra: list[str], log: Path | None) -> dict[str, float]:
    env = os.environ | {"PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(tree / "benchmarks" / "agent_throughput.py")]
    command += ["--callers", "1", "--seconds", str(seconds), *extra]
    out = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
    if log is not None:  # the whole output (phases, handlers, CPU by owner) kept
        log.write_text(out.stdout + out.stderr[-3000:])
    if out.returncode != 0:  # shown, and the run left out of the medians
        print(f"run failed ({out.returncode}):\n{out.stderr[-3000:]}", flush=True)
        return {}
    found = {}
    for name, pattern in FIGURES.items():
        match = pattern.search(out.stdout)
        if match:
            found[name] = float(match.group(1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="git ref to compare this tree with")
    parser.add_argument(
        "--layouts",
        action="store_true",
        help="compare the layouts instead: --layout one (as base) and split, on one tree",
    )
    parser.add_argument("--new", default=None, help="a git ref measured instead of this tree")
    parser.add_argument("--rounds", type=int, default=3, help="ABBA rounds (2 runs a side)")
    parser.add_argument("--seconds", type=float, default=20.0, help="load window per run")
    parser.add_argument("--log", type=Path, default=None, help="keep each run's output here")
    parser.add_argument("extra", nargs="*", help="more agent_throughput.py arguments")
    args = parser.parse_args()
    if (args.base is None) == (not args.layouts):
        parser.error("give --base REF or --layouts (one of them)")
    a, b = ("one", "split") if args.layouts else ("base", "this tree")
    results: dict[str, list[dict[str, float]]] = {a: [], b: []}
    with tempfile.TemporaryDirectory() as tmp:
        new = ROOT if args.new is None else unpack(args.new, Path(tmp) / "new")
        if args.layouts:
            sides = {a: (new, ["--layout", "one"]), b: (new, ["--layout", "split"])}
        else:
            sides = {a: (unpack(args.base, Path(tmp) / "base"), []), b: (new, [])}
        for n in range(args.rounds):
            order = (a, b) if n % 2 == 0 else (b, a)
            for side in (*order, *reversed(order)):
                load = os.getloadavg()[0]
                tree, flags = sides[side]
                log = None
                if args.log is not None:
                    args.log.mkdir(parents=True, exist_ok=True)
                    log = args.log / f"{n + 1}-{side.replace(' ', '-')}-{len(results[side])}.txt"
                figures = run(tree, args.seconds, [*flags, *args.extra], log)
                results[side].append(figures)
                shown = ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
                print(f"round {n + 1} {side:>9} (load {load:4.1f}): {shown}", flush=True)
    print(f"\nmedians over {2 * args.rounds} runs a side (ms), {b} / {a}:")
    for name in FIGURES:
        sides_ = {s: [r[name] for r in rs if name in r] for s, rs in results.items()}
        if all(sides_.values()):
            first, second = (statistics.median(sides_[s]) for s in (a, b))
            print(f"  {name:<22} {a} {first:6.1f}  {b} {second:6.1f}  ratio {second / first:.2f}")


if __name__ == "__main__":
    main()
