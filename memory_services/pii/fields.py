"""The text a write request stores, by request type: what the PII screen rewrites.

:func:`screened` returns a copy of the request with every stored text passed through
``clean(kind, text)``; reads, deletes and other operations are not screened (:func:`stores`).
Kinds match the agent's memory kinds: ``fact``, ``episode``, ``turn``, ``summary``,
``bullet``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from react_mem.schema import AgentStep, PlanStep, WireModel
from react_mem.schema.conversations import ConversationRequest
from react_mem.schema.episodes import EpisodeRequest
from react_mem.schema.facts import FactInput, FactRequest
from react_mem.schema.playbook import DeltaOperation, PlaybookRequest

#: ``clean(kind, text)``: the text to store instead (or an error refusing it).
Clean = Callable[[str, str], str]
R = TypeVar("R", bound=WireModel)

#: The operations of each request type that write memory.
WRITES: dict[type[WireModel], frozenset[str]] = {
    FactRequest: frozenset({"store", "update"}),
    EpisodeRequest: frozenset({"store"}),
    ConversationRequest: frozenset({"append", "update-summary"}),
    PlaybookRequest: frozenset({"apply-delta"}),
}


def stores(request: WireModel) -> bool:
    operation = getattr(request, "operation", "")
    return operation in WRITES.get(type(request), frozenset())


def screened(request: R, clean: Clean) -> R:
    """``request`` with its stored text cleaned (unchanged if it writes nothing)."""
    if not stores(request):
        return request
    if isinstance(request, FactRequest):
        return request.model_copy(
            update={
                "facts": [_fact(f, clean) for f in request.facts],
                "fact": _fact(request.fact, clean) if request.fact else None,
            }
        )
    if isinstance(request, EpisodeRequest):
        return request.model_copy(
            update={
                "goal": clean("episode", request.goal),
                "lessons": [clean("episode", lesson) for lesson in request.lessons],
                "steps": [_step(s, clean) for s in request.steps],
            }
        )
    if isinstance(request, ConversationRequest):
        kind = "turn" if request.operation == "append" else "summary"
        return request.model_copy(
            update={
                "query": clean(kind, request.query),
                "answer": clean(kind, request.answer),
                "summary": clean(kind, request.summary),
            }
        )
    assert isinstance(request, PlaybookRequest)
    delta = request.delta
    if delta is None:  # refused by the service
        return request
    operations = [_operation(op, clean) for op in delta.operations]
    update = {"operations": operations, "reason": clean("bullet", delta.reason)}
    return request.model_copy(update={"delta": delta.model_copy(update=update)})


def _values(kind: str, mapping: dict[str, str], clean: Clean) -> dict[str, str]:
    return {key: clean(kind, value) for key, value in mapping.items()}


def _fact(fact: FactInput, clean: Clean) -> FactInput:
    return fact.model_copy(
        update={
            "content": clean("fact", fact.content),
            "context": clean("fact", fact.context) if fact.context else "",
            "metadata": _values("fact", fact.metadata, clean),
        }
    )


def _step(step: AgentStep, clean: Clean) -> AgentStep:
    return step.model_copy(
        update={
            "thought": clean("episode", step.thought),
            "arguments": _values("episode", step.arguments, clean),
            "observation": clean("episode", step.observation),
            "plan": [_plan(p, clean) for p in step.plan],
            "subagent_results": _values("episode", step.subagent_results, clean),
        }
    )


def _plan(plan: PlanStep, clean: Clean) -> PlanStep:
    return plan.model_copy(
        update={"goal": clean("episode", plan.goal), "result": clean("episode", plan.result)}
    )


def _operation(op: DeltaOperation, clean: Clean) -> DeltaOperation:
    def optional(text: str | None) -> str | None:
        return None if text is None else clean("bullet", text)

    return op.model_copy(
        update={
            "content": optional(op.content),
            "topic": optional(op.topic),
            "concept": optional(op.concept),
            "tags": [clean("bullet", tag) for tag in op.tags],
            "metadata": _values("bullet", op.metadata, clean),
        }
    )
