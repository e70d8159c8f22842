"""Memory tools the LLM may call mid-invocation (seed 004, "Tool Extensions")."""

from __future__ import annotations

from react_mem.agent.tools import Argument, Invoke, Tool, ToolCall, ToolError
from react_mem.clients.episodes import EpisodeClient
from react_mem.clients.facts import FactClient
from react_mem.processor.flow import Flow
from react_mem.schema.facts import FactInput

QUERY = (Argument("query", "string", "What to look for"),)


def _required(call: ToolCall, tool: str, name: str) -> str:
    value = call.arguments.get(name, "").strip()
    if not value:
        raise ToolError(f"{tool} needs a non-empty {name!r}")
    return value


def retrieve_facts(top_k: int, min_score: float | None = None) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        query = _required(call, "RetrieveFacts", "query")
        # The user's facts across their conversations: the scope without its conversation.
        facts = await FactClient.of(call.flow, timeout=call.timeout).retrieve(
            call.scope.owner(),
            query,
            top_k=max(top_k, 1),
            min_score=min_score,
        )
        if not facts:
            return "No stored facts match."
        return "\n".join(f"- {f.content} (score {f.score or 0:.2f})" for f in facts)

    return invoke


def recall_episodes(top_k: int, min_score: float | None = None) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        query = _required(call, "RecallEpisodes", "query")
        episodes = await EpisodeClient.of(call.flow, timeout=call.timeout).retrieve(
            call.scope.owner(),
            goal=query,
            top_k=max(top_k, 1),
            min_score=min_score,
            steps=False,  # the tool's answer shows goal, outcome and lessons
        )
        if not episodes:
            return "No similar past episodes."
        return "\n".join(
            f"- {e.goal} -> {e.outcome}"
            + (f". Lessons: {'; '.join(e.lessons)}" if e.lessons else "")
            for e in episodes
        )

    return invoke


async def _store_fact(call: ToolCall) -> str:
    content = _required(call, "StoreFact", "fact_content")
    client = FactClient.of(call.flow, timeout=call.timeout)
    response = await client.store(call.scope, [FactInput(content=content)])
    status = response.stored[0].status if response.stored else "added"
    return "Stored." if status == "added" else f"Already known ({status})."


def memory_tools(
    flow: Flow,
    fact_top_k: int,
    episode_top_k: int,
    *,
    fact_min_score: float | None = None,
    episode_min_score: float | None = None,
) -> list[Tool]:
    """The memory tools whose services run in ``flow``; the score floors are those of the
    memory recalled into the prompt (``fact-min-score``, ``episode-min-score``)."""
    tools = []
    if FactClient.available(flow):
        tools.append(
            Tool(
                "RetrieveFacts",
                "Retrieve more facts from long-term memory",
                QUERY,
                retrieve_facts(fact_top_k, fact_min_score),
            )
        )
        tools.append(
            Tool(
                "StoreFact",
                "Store a fact for future conversations",
                (Argument("fact_content", "string", "The fact, as one sentence"),),
                _store_fact,
            )
        )
    if EpisodeClient.available(flow):
        tools.append(
            Tool(
                "RecallEpisodes",
                "Search similar past problem-solving episodes and their lessons",
                QUERY,
                recall_episodes(episode_top_k, episode_min_score),
            )
        )
    return tools
