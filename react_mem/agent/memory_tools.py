"""Memory tools the LLM may call mid-invocation (seed 004, "Tool Extensions")."""

from __future__ import annotations

from react_mem.agent.sources import EPISODES, FACTS
from react_mem.agent.tools import Argument, Invoke, Tool, ToolCall, ToolError
from react_mem.processor.flow import Flow
from react_mem.schema.episodes import EpisodeRequest, EpisodeResponse
from react_mem.schema.facts import FactInput, FactRequest, FactResponse

QUERY = (Argument("query", "string", "What to look for"),)


def _checked(response: FactResponse | EpisodeResponse, service: str) -> None:
    if response.error is not None:
        raise ToolError(f"{service}: {response.error.message}")


def _required(call: ToolCall, tool: str, name: str) -> str:
    value = call.arguments.get(name, "").strip()
    if not value:
        raise ToolError(f"{tool} needs a non-empty {name!r}")
    return value


def retrieve_facts(top_k: int, min_score: float | None = None) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        query = _required(call, "RetrieveFacts", "query")
        request = FactRequest(
            operation="retrieve",
            collection=call.scope.collection,
            user=call.scope.user,
            query=query,
            top_k=max(top_k, 1),
            min_score=min_score,
        )
        response: FactResponse = await call.flow.client(FACTS.client).request(
            request, timeout=call.timeout
        )
        _checked(response, "fact-memory")
        if not response.facts:
            return "No stored facts match."
        return "\n".join(f"- {f.content} (score {f.score or 0:.2f})" for f in response.facts)

    return invoke


def recall_episodes(top_k: int, min_score: float | None = None) -> Invoke:
    async def invoke(call: ToolCall) -> str:
        query = _required(call, "RecallEpisodes", "query")
        request = EpisodeRequest(
            operation="retrieve",
            collection=call.scope.collection,
            user=call.scope.user,
            goal=query,
            top_k=max(top_k, 1),
            min_score=min_score,
        )
        response: EpisodeResponse = await call.flow.client(EPISODES.client).request(
            request, timeout=call.timeout
        )
        _checked(response, "episode-memory")
        if not response.episodes:
            return "No similar past episodes."
        return "\n".join(
            f"- {e.goal} -> {e.outcome}"
            + (f". Lessons: {'; '.join(e.lessons)}" if e.lessons else "")
            for e in response.episodes
        )

    return invoke


async def _store_fact(call: ToolCall) -> str:
    content = _required(call, "StoreFact", "fact_content")
    request = FactRequest(
        operation="store",
        collection=call.scope.collection,
        user=call.scope.user,
        conversation_id=call.scope.conversation,
        facts=[FactInput(content=content)],
    )
    response: FactResponse = await call.flow.client(FACTS.client).request(
        request, timeout=call.timeout
    )
    _checked(response, "fact-memory")
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
    if flow.has_client(FACTS.client):
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
    if flow.has_client(EPISODES.client):
        tools.append(
            Tool(
                "RecallEpisodes",
                "Search similar past problem-solving episodes and their lessons",
                QUERY,
                recall_episodes(episode_top_k, episode_min_score),
            )
        )
    return tools
