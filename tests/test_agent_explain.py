"""Explainability as agent-manager's, read with TrustGraph 2.11's own code: the explain
events on the response stream and the Triples on the flow's explainability queue are what
TrustGraph's provenance builders produce for the same invocation, in its retrieval graph,
with or without a librarian holding the texts; react-mem adds the memory the prompt held,
with scores, linked from the conclusion."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from trustgraph.provenance import (
    GRAPH_RETRIEVAL,
    agent_final_triples,
    agent_final_uri,
    agent_iteration_triples,
    agent_iteration_uri,
    agent_observation_triples,
    agent_observation_uri,
    agent_session_triples,
    agent_session_uri,
    agent_thought_uri,
    set_graph,
)
from trustgraph.schema import AgentRequest as TGAgentRequest
from trustgraph.schema import Triples as TGTriples

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.facts import FactInput, FactRequest, FactResponse
from react_mem.schema.services import LibrarianRequest, LibrarianResponse
from tests.support.agent_stack import Stack, agent_stack
from tests.support.scripted_llm import replies
from tests.support.services import Service, service_double
from tests.support.trustgraph import converse, trustgraph_agent, trustgraph_backend

pytestmark = pytest.mark.broker

FACT = "The Eiffel Tower is in Paris."
LOOKUP = {"type": "knowledge-query", "name": "lookup", "description": "Ask the knowledge graph"}
QUESTION = "Where is the Eiffel Tower?"
STARTED_AT = "http://www.w3.org/ns/prov#startedAtTime"
RM = "urn:react-mem:ns:"


async def store_fact(stack: Stack) -> None:
    from react_mem.bus.rpc import RequestResponseClient

    topics = stack.topics["fact-memory"]
    client: RequestResponseClient[FactRequest, FactResponse] = RequestResponseClient(
        stack.transport, topics["request"], topics["response"], FactResponse
    )
    await client.start()
    try:
        request = FactRequest(operation="store", facts=[FactInput(content=FACT)])
        assert (await client.request(request, timeout=20)).error is None
    finally:
        await client.close()


def objects(triples: list[Any], predicate: str) -> list[str]:
    return [t.o.value or t.o.iri for t in triples if t.p.iri == predicate]


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streaming"])
@pytest.mark.parametrize("librarian", [False, True], ids=["no-librarian", "librarian"])
async def test_explain_events_and_provenance_are_trustgraphs(
    broker: EmbeddedBroker,
    transport: PulsarTransport,
    tmp_path: Path,
    unique: str,
    librarian: bool,
    streaming: bool,
) -> None:
    explainability = f"flow:tg:explainability-{unique}:default:f1"
    session = f"s-{unique}"
    topics = {"explainability": explainability}
    library = {
        "request": f"request:tg:librarian-{unique}:default",
        "response": f"response:tg:librarian-{unique}:default",
    }
    if librarian:
        topics |= {
            "librarian-request": library["request"],
            "librarian-response": library["response"],
        }
    async with (
        service_double(
            transport,
            tmp_path,
            f"librarian-{unique}",
            library,
            LibrarianRequest,
            LibrarianResponse,
            lambda r: LibrarianResponse(document_id=r.document_id),
        ) as stored,
        agent_stack(
            transport,
            tmp_path,
            unique,
            script=replies(
                'Thought: ask the graph\nAction: lookup\nArgs: {"question": "Eiffel Tower"}',
                "Thought: I know now\nFinal Answer: In Paris.",
            ),
            services=("fact-memory",),
            tools={"lookup": LOOKUP},
            agent_topics=topics,
        ) as stack,
        trustgraph_backend(broker.url, transport) as backend,
        trustgraph_agent(backend, stack.topics["agent"]) as agent,
    ):
        store = await backend.create_consumer(explainability, f"store-{unique}", TGTriples)
        await store_fact(stack)
        got = await converse(
            agent, TGAgentRequest(question=QUESTION, session_id=session, streaming=streaming)
        )
        sent = []
        for _ in range(5):
            message = await asyncio.wait_for(store.receive(), 20)
            await store.acknowledge(message)
            sent.append(message.value())
        await store.close()

    explains = [r for r in got if r.message_type == "explain"]
    question, iteration, observation = (
        agent_session_uri(session),
        agent_iteration_uri(session, 1),
        agent_observation_uri(session, 1),
    )
    memory, final = f"{question}/memory", agent_final_uri(session)
    assert [r.explain_id for r in explains] == [question, memory, iteration, observation, final]
    assert all(r.explain_graph == GRAPH_RETRIEVAL for r in explains)
    by_id = {r.explain_id: r.explain_triples for r in explains}

    # agent-manager's triples, built by TrustGraph's own provenance functions.
    # With a librarian, the thought, observation and answer are documents there.
    thought_doc, observation_doc, answer_doc = documents(stored, session, librarian)
    (started,) = objects(by_id[question], STARTED_AT)
    assert by_id[question] == set_graph(
        agent_session_triples(question, QUESTION, started), GRAPH_RETRIEVAL
    )
    assert by_id[iteration] == set_graph(
        agent_iteration_triples(
            iteration,
            question_uri=question,
            action="lookup",
            arguments={"question": "Eiffel Tower"},
            thought_uri=agent_thought_uri(session, 1) if thought_doc else None,
            thought_document_id=thought_doc,
        ),
        GRAPH_RETRIEVAL,
    )
    assert by_id[observation] == set_graph(
        agent_observation_triples(observation, iteration, document_id=observation_doc),
        GRAPH_RETRIEVAL,
    )
    answer = got[-1]
    expected_final = set_graph(
        agent_final_triples(
            final,
            previous_uri=observation,
            document_id=answer_doc,
            in_token=answer.in_token,
            out_token=answer.out_token,
            model=answer.model,
        ),
        GRAPH_RETRIEVAL,
    )
    assert by_id[final][: len(expected_final)] == expected_final
    # react-mem's own: the conclusion names the memory the prompt held ...
    assert objects(by_id[final][len(expected_final) :], RM + "memoryContext") == [memory]
    # ... the fact, its id and its similarity score, derived from the question.
    assert objects(by_id[memory], "http://www.w3.org/ns/prov#wasDerivedFrom")[0] == question
    assert objects(by_id[memory], RM + "content") == [FACT]
    assert objects(by_id[memory], RM + "memoryKind") == ["fact"]
    (score,) = objects(by_id[memory], "https://trustgraph.ai/ns/score")
    assert 0.3 < float(score) <= 1.0
    # The same triples went to the explainability flow, one Triples message per step.
    assert [t.metadata.id for t in sent] == [question, memory, iteration, observation, final]
    assert all(t.metadata.collection == "default" for t in sent)
    assert [t.triples for t in sent] == [by_id[t.metadata.id] for t in sent]
    assert answer.message_type == "answer" and answer.end_of_dialog
    assert "".join(r.content for r in got if r.message_type == "answer") == "In Paris."


def documents(
    stored: Service, session: str, librarian: bool
) -> tuple[str | None, str | None, str | None]:
    """The thought, observation and answer documents the agent saved, as agent-manager
    names, titles and encodes them; all ``None`` without a librarian."""
    if not librarian:
        assert stored.requests == []
        return None, None, None
    saved = {r.document_id: r for r in stored.requests}
    thought = agent_thought_uri(session, 1)
    observation = agent_observation_uri(session, 1)
    answer = f"{agent_session_uri(session)}/answer"
    assert list(saved) == [thought, observation, answer]
    texts = {k: base64.b64decode(r.content).decode() for k, r in saved.items()}
    assert texts == {
        thought: "ask the graph",
        observation: "KNOWLEDGE about Eiffel Tower",
        answer: "In Paris.",
    }
    titles = [r.document_metadata.title for r in saved.values() if r.document_metadata]
    assert titles == ["Agent Thought: lookup", "Agent Observation", f"Agent Answer: {QUESTION}..."]
    assert all(r.operation == "add-document" for r in saved.values())
    return thought, observation, answer
