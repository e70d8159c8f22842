"""The agent's metrics, with TrustGraph's react-agent names and labels."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

from react_mem.metrics import per_registry

BUCKETS_LLM = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
BUCKETS_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True)
class AgentMetrics:
    sessions: Counter
    iterations: Histogram
    tool_calls: Counter
    tool_duration: Histogram
    tool_errors: Counter
    llm_duration: Histogram
    parse_retries: Counter
    memory_recall: Histogram
    memory_missed: Counter
    compressions: Counter
    turns_lost: Counter


def _create(registry: CollectorRegistry) -> AgentMetrics:
    p = "processor"
    return AgentMetrics(
        sessions=Counter(
            "tg_agent_session_total", "Agent sessions by outcome", [p, "outcome"], registry=registry
        ),
        iterations=Histogram(
            "tg_agent_iteration_count",
            "Number of ReAct iterations per session",
            [p],
            buckets=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20),
            registry=registry,
        ),
        tool_calls=Counter(
            "tg_agent_tool_invocation_total",
            "Agent tool calls per tool name",
            [p, "tool"],
            registry=registry,
        ),
        tool_duration=Histogram(
            "tg_agent_tool_duration_seconds",
            "Per-tool invocation latency (seconds)",
            [p, "tool"],
            buckets=BUCKETS_LLM,
            registry=registry,
        ),
        tool_errors=Counter(
            "tg_agent_tool_error_total", "Tool invocation failures", [p, "tool"], registry=registry
        ),
        llm_duration=Histogram(
            "tg_agent_llm_duration_seconds",
            "LLM reasoning step latency per iteration (seconds)",
            [p],
            buckets=BUCKETS_LLM,
            registry=registry,
        ),
        parse_retries=Counter(
            "tg_agent_parse_retry_total",
            "Corrective retries after malformed LLM replies",
            [p],
            registry=registry,
        ),
        memory_recall=Histogram(
            "tg_agent_memory_recall_seconds",
            "Context assembly at invocation start, fan-out and embedding included (seconds)",
            [p],
            buckets=BUCKETS_FAST,
            registry=registry,
        ),
        memory_missed=Counter(
            "tg_agent_memory_missed_total",
            "Memory sources left out of a context (absent, late or failing)",
            [p, "source"],
            registry=registry,
        ),
        compressions=Counter(
            "tg_agent_working_memory_compressions_total",
            "Working-memory compressions requested",
            [p],
            registry=registry,
        ),
        turns_lost=Counter(
            "tg_agent_turn_not_stored_total",
            "Conversation turns not stored after the answer went out (every attempt failed)",
            [p],
            registry=registry,
        ),
    )


agent_metrics = per_registry(_create)
