"""Which playbook bullets an invocation showed and which its decisions cited (the credit
the learner gives: only cited bullets count as helpful or harmful)."""

from __future__ import annotations

from react_mem.agent.parse import Action, Final, ParseError
from react_mem.schema.agent import MemoryState


def shown_bullets(state: MemoryState) -> list[str]:
    """The ids of the playbook bullets in the invocation's prompt."""
    return list(dict.fromkeys(r.id for r in state.used if r.kind == "bullet" and r.id))


def cited_bullets(
    state: MemoryState, decision: Action | Final | ParseError, shown: list[str]
) -> list[str]:
    """The bullets cited so far, with the ones ``decision`` cites among those ``shown``;
    an id the prompt did not hold is ignored (a model's slip credits nothing)."""
    said = () if isinstance(decision, ParseError) else decision.bullets
    known = set(shown)
    return list(dict.fromkeys([*state.cited, *(b for b in said if b in known)]))
