"""Does the PII screen's heap grow with the words it has seen? Before and after, side by side.

spaCy adds every word it has not seen to its vocabulary for the life of the process;
``Detector.find`` now tokenizes inside a memory zone, which drops the text's new words with
it. This screens ``--texts`` texts that each hold three words never seen before (an id, a
number, an e-mail address: what users' texts hold) in two fresh processes, one with the
zone replaced by a no-op (the old behaviour), and prints the heap (``RssAnon`` after
``malloc_trim``) gained over each third and the strings spaCy holds at the end.

    OMP_NUM_THREADS=1 python benchmarks/pii_words.py [--texts 30000]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def anon_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("RssAnon:"))


def run(texts: int, zone: bool) -> dict[str, object]:
    from memory_services.pii.engine import Detector
    from memory_services.pii.policy import PiiPolicy

    detector, policy = Detector(), PiiPolicy()
    if not zone:
        detector._nlp.memory_zone = contextlib.nullcontext  # the old behaviour

    def text(n: int) -> str:
        return f"user-{n % 48}-{n // 48} took a ferret to Osaka (note {n}); mail x{n}@corp-mail.io"

    def settled() -> float:
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        return anon_mib()

    for n in range(1000):  # warm: Presidio's own first-use allocations
        detector.find(text(n), policy.entities, policy.threshold)
    start, gained = settled(), []
    for n in range(1000, 1000 + texts):
        detector.find(text(n), policy.entities, policy.threshold)
        if (n - 999) % (texts // 3) == 0:
            gained.append(round(settled() - start, 1))
    return {"gained": gained, "strings": detector.words_known}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=30_000)
    parser.add_argument("--child", choices=("zone", "none"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.texts, args.child == "zone")))
        return
    print(f"load average {os.getloadavg()[0]:.2f}; {args.texts:,} texts, 3 new words each")
    for child, label in (("none", "before (no memory zone)"), ("zone", "after (memory zone)")):
        out = subprocess.run(
            [sys.executable, __file__, "--texts", str(args.texts), "--child", child],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        got = json.loads(out.strip().splitlines()[-1])
        thirds = ", ".join(f"+{g} MiB" for g in got["gained"])
        print(f"  {label:<24} heap after each third: {thirds}; spaCy strings {got['strings']:,}")


if __name__ == "__main__":
    main()
