"""Questions won and lost between two ``locomo_recall.py --dump`` files, per split.

Two runs whose stores differ (e.g. ``--sentence-pooling separate`` and ``late``) cannot be
columns of one run; each dumps every question's top k per column, and this counts, at each
k, the questions one column of the second file finds all the evidence of and the first's
does not (won), and the reverse (lost), per split and category.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from locomo_recall import CATEGORIES, DEFAULT_DATA, TUNE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--column", default="+sentences")
    parser.add_argument("--ks", default="5,10")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    data = json.loads(args.data.read_text())
    before = json.loads(args.before.read_text())[args.column]
    after = json.loads(args.after.read_text())[args.column]
    asked = [  # the questions locomo_recall.py asks, in its order
        ("tune" if number < TUNE else "report", CATEGORIES.get(qa["category"], "?"), qa)
        for number, sample in enumerate(data)
        for qa in sample["qa"]
        if qa.get("evidence") and "answer" in qa
    ]
    if len(asked) != len(before) or len(asked) != len(after):
        raise SystemExit("the dumps are not of these questions (same --data, --limit?)")
    for k in (int(k) for k in args.ks.split(",")):
        won: Counter[tuple[str, str]] = Counter()
        lost: Counter[tuple[str, str]] = Counter()
        for (split, category, qa), old, new in zip(asked, before, after, strict=True):
            hit_old = all(e in old[:k] for e in qa["evidence"])
            hit_new = all(e in new[:k] for e in qa["evidence"])
            for name in (category, "all"):
                won[split, name] += hit_new and not hit_old
                lost[split, name] += hit_old and not hit_new
        print(f"@{k}, {args.after.name} against {args.before.name} ({args.column}):")
        for key in sorted(won.keys() | lost.keys()):
            print(f"  {key[0]:<7} {key[1]:<12} +{won[key]}/-{lost[key]}")


if __name__ == "__main__":
    main()
