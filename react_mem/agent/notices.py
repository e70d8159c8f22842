"""What the answer says of the quota notices its turn took from the conversation (left by
the learner when a write after an earlier answer evicted or was refused at a quota; see
docs/faults.md). Kinds and counts only: a notice holds no words of the user."""

from __future__ import annotations

from collections.abc import Sequence

from react_mem.schema.conversations import QuotaNotice

_NOUNS = {"fact": ("fact", "facts"), "episode": ("episode", "episodes")}


def _many(count: int, kind: str) -> str:
    one, more = _NOUNS.get(kind, (kind, kind))
    return f"{count} {one if count == 1 else more}"


def told(notices: Sequence[QuotaNotice]) -> str | None:
    """One sentence per kind of event, summed over the notices; None without any."""
    counts: dict[tuple[str, str], int] = {}
    for n in notices:
        counts[(n.kind, n.action)] = counts.get((n.kind, n.action), 0) + n.count
    said = []
    for (kind, action), count in sorted(counts.items()):
        if action == "evicted":
            said.append(
                f"Your memory was full: {_many(count, kind)} of the oldest or least used "
                f"were removed to keep what you asked for."
            )
        else:
            said.append(
                f"Memory is full: {_many(count, kind)} from an earlier message "
                f"{'was' if count == 1 else 'were'} not saved."
            )
    return " ".join(said) or None
