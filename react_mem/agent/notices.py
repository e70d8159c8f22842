"""What the answer says of the quota notices its turn took from the conversation (left by
the learner when a write after an earlier answer evicted or was refused at a quota; see
docs/faults.md). Kinds and counts only: a notice holds no words of the user."""

from __future__ import annotations

from collections.abc import Sequence

from react_mem.schema.conversations import QuotaNotice


def _many(count: int, noun: str) -> str:
    return f"{count} {noun if count == 1 else noun + 's'}"


def told(notices: Sequence[QuotaNotice]) -> str | None:
    """One sentence per kind of event, summed over the notices; None without any."""
    counts: dict[tuple[str, str], int] = {}
    for n in notices:
        counts[(n.kind, n.action)] = counts.get((n.kind, n.action), 0) + n.count
    said = []
    for (kind, action), count in sorted(counts.items()):
        was = "was" if count == 1 else "were"
        if action == "refused":
            said.append(
                f"Your memory is full: {_many(count, kind)} from an earlier message {was} "
                "not saved."
            )
        elif kind == "fact":  # evicted to keep a fact the user asked to be remembered
            said.append(
                f"Your memory was full, so {_many(count, 'earlier ' + kind)} {was} removed to "
                "keep what you asked me to remember."
            )
        else:
            said.append(
                f"Your memory was full, so {_many(count, 'older ' + kind)} {was} removed to "
                "make room."
            )
    return " ".join(said) or None
