"""Local models side by side: does the agent's answer use the fact memory recalled, and how
fast does the model generate on this machine?

Each model answers the demo's second question with the agent's own prompt (memory holding
"The user is allergic to peanuts.", see ``react_mem.demo.probe``) once greedily
(temperature 0, as the stack runs) and once per seed at temperature 0.7. An answer passes
when it mentions the allergy. Reported: the pass rate, the decisions taken, the median
seconds per reply and generated tokens per second (prompt processing included), with the
model's load time.

    python benchmarks/local_model.py                       # the packaged SmolLM2-135M
    python benchmarks/local_model.py --seeds 8 other=/path/to/model.gguf
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from pathlib import Path

from react_mem.demo import probe as recall_probe
from react_mem.llm.llama_cpp import LlamaCppBackend, packaged_model


async def measure(name: str, path: Path, seeds: int) -> None:
    size = path.stat().st_size  # noqa: ASYNC240 (a benchmark, before anything runs)
    started = time.perf_counter()
    backend = LlamaCppBackend(recall_probe.settings(path, 0, 0.0))
    await backend.start()
    await backend.close()
    load = time.perf_counter() - started
    greedy = await recall_probe.ask(path, 0, temperature=0.0)
    trials = [await recall_probe.ask(path, seed) for seed in range(1, seeds + 1)]
    for t in [greedy, *trials]:
        print(f"  seed {t.seed}: {'PASS' if t.recalled else 'fail'} {t.reply[:150]!r}")
    rate = recall_probe.pass_rate(trials)
    actions = Counter(t.action or "unparsed" for t in trials)
    speed = statistics.median(t.out_tokens / t.seconds for t in [greedy, *trials] if t.seconds)
    seconds = statistics.median(t.seconds for t in [greedy, *trials])
    print(
        f"{name}: {size / 2**20:.0f} MiB, load {load:.1f}s; greedy "
        f"{'PASS' if greedy.recalled else 'fail'}; seeded pass rate {rate:.0%} "
        f"({sum(t.recalled for t in trials)}/{len(trials)}); decisions {dict(actions)}; "
        f"median {seconds:.1f}s per reply, {speed:.1f} tokens/s"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="NAME=PATH of GGUF files to compare")
    parser.add_argument("--seeds", type=int, default=8, help="seeded tries per model (8)")
    args = parser.parse_args()
    models = {"smollm2-135m": packaged_model()}
    for item in args.models:
        name, _, path = item.partition("=")
        models[name] = Path(path)
    for name, path in models.items():
        print(f"{name} ({path.name})")
        await measure(name, path, args.seeds)


if __name__ == "__main__":
    asyncio.run(main())
