"""Explainability as agent-manager's: PROV-O provenance of each invocation in TrustGraph's
vocabulary, sent as ``explain`` messages on the response stream and as ``Triples`` on the
flow's ``explainability`` queue (when the flow names it), in the ``urn:graph:retrieval``
named graph that ``tg-invoke-agent -x`` and the Workbench read.

The entities are TrustGraph's: the question (``tg:Question``/``tg:AgentQuestion``), each
iteration's analysis (``tg:Analysis``/``tg:ToolUse``, with its thought), its observation and
the conclusion (``tg:Conclusion``/``tg:Answer``), chained by ``prov:wasDerivedFrom``.
With a librarian in the flow (``librarian-*``), the thought, observation and answer texts
are stored there as documents and linked (``tg:document``), as agent-manager does.
react-mem adds its own (namespace ``urn:react-mem:ns:``): the memory in the prompt
(``rm:MemoryContext``), derived from the question, with one entity per fact, episode,
conversation turn, summary or playbook bullet, its id and score; the conclusion names it
with ``rm:memoryContext``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from datetime import UTC, datetime

from react_mem.schema.agent import MemoryRef
from react_mem.schema.primitives import Term, Triple

PROV = "http://www.w3.org/ns/prov#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
TG = "https://trustgraph.ai/ns/"
RM = "urn:react-mem:ns:"
#: TrustGraph's named graph for query-time explainability.
GRAPH_RETRIEVAL = "urn:graph:retrieval"

ENTITY, DERIVED_FROM, STARTED_AT = PROV + "Entity", PROV + "wasDerivedFrom", PROV + "startedAtTime"
MEMORY_TYPES = {
    "fact": "Fact",
    "episode": "Episode",
    "turn": "ConversationTurn",
    "summary": "ConversationSummary",
    "bullet": "PlaybookBullet",
}


# -- URIs (TrustGraph's provenance URIs; the memory context is react-mem's) -------------
def session_uri(session: str) -> str:
    return f"urn:trustgraph:agent:{session}"


def iteration_uri(session: str, iteration: int) -> str:
    return f"{session_uri(session)}/i{iteration}"


def thought_uri(session: str, iteration: int) -> str:
    """The thought message's id (agent-manager's)."""
    return f"{iteration_uri(session, iteration)}/thought"


def observation_uri(session: str, iteration: int) -> str:
    return f"{iteration_uri(session, iteration)}/observation"


def final_uri(session: str) -> str:
    return f"{session_uri(session)}/final"


def memory_uri(session: str) -> str:
    return f"{session_uri(session)}/memory"


def answer_document(session: str) -> str:
    """The librarian document holding the answer (agent-manager's id)."""
    return f"{session_uri(session)}/answer"


# -- triples ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _iri(value: str) -> Term:
    """One term per IRI, shared (never changed): most are the vocabulary's, repeated in
    every triple (building them afresh was most of the 2.6 ms an ask's provenance took)."""
    return Term(type="i", iri=value)


def _literal(value: object) -> Term:
    return Term(type="l", value=str(value))


def _t(s: str, p: str, o: Term) -> Triple:
    return Triple(s=_iri(s), p=_iri(p), o=o, g=GRAPH_RETRIEVAL)


def _types(uri: str, label: str, *types: str) -> list[Triple]:
    return [
        _t(uri, RDF_TYPE, _iri(ENTITY)),
        *(_t(uri, RDF_TYPE, _iri(t)) for t in types),
        _t(uri, RDFS_LABEL, _literal(label)),
    ]


def _after(session: str, iteration: int) -> str:
    """What an iteration or the conclusion derives from: the question at first, else the
    previous iteration's observation (agent-manager's chain)."""
    return session_uri(session) if iteration <= 1 else observation_uri(session, iteration - 1)


def session_triples(session: str, question: str, started: datetime | None = None) -> list[Triple]:
    uri = session_uri(session)
    when = (started or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    return [
        *_types(uri, "Agent Question", TG + "Question", TG + "AgentQuestion"),
        _t(uri, STARTED_AT, _literal(when)),
        _t(uri, TG + "query", _literal(question)),
    ]


def iteration_triples(
    session: str,
    iteration: int,
    action: str,
    arguments: dict[str, str],
    thought_document: str | None = None,
) -> list[Triple]:
    """An iteration's analysis; its thought is an entity when the librarian holds its text
    (``thought_document``), as in agent-manager."""
    uri = iteration_uri(session, iteration)
    triples = [
        *_types(uri, f"Analysis: {action}", TG + "Analysis", TG + "ToolUse"),
        _t(uri, TG + "action", _literal(action)),
        _t(uri, TG + "arguments", _literal(json.dumps(arguments))),
        _t(uri, DERIVED_FROM, _iri(_after(session, iteration))),
    ]
    if thought_document:
        sub = thought_uri(session, iteration)
        triples += [
            _t(uri, TG + "thought", _iri(sub)),
            _t(sub, RDF_TYPE, _iri(TG + "Reflection")),
            _t(sub, RDF_TYPE, _iri(TG + "Thought")),
            _t(sub, RDFS_LABEL, _literal("Thought")),
            _t(sub, DERIVED_FROM, _iri(uri)),
            _t(sub, TG + "document", _iri(thought_document)),
        ]
    return triples


def observation_triples(
    session: str, iteration: int, *, document: str | None = None, error: str | None = None
) -> list[Triple]:
    """An iteration's observation (``document``: its text in the librarian); ``error``: the
    tool's failure (``tg:toolError``, react-mem's addition)."""
    uri = observation_uri(session, iteration)
    triples = [
        *_types(uri, "Observation", TG + "Observation"),
        _t(uri, DERIVED_FROM, _iri(iteration_uri(session, iteration))),
    ]
    if document:
        triples.append(_t(uri, TG + "document", _iri(document)))
    if error:
        triples += [
            _t(uri, TG + "toolError", _literal(error)),
            _t(uri, RDF_TYPE, _iri(TG + "Error")),
        ]
    return triples


def final_triples(
    session: str,
    iteration: int,
    *,
    in_token: int | None = None,
    out_token: int | None = None,
    model: str | None = None,
    document: str | None = None,
    memory: bool = False,
) -> list[Triple]:
    uri = final_uri(session)
    triples = [
        *_types(uri, "Conclusion", TG + "Conclusion", TG + "Answer"),
        _t(uri, DERIVED_FROM, _iri(_after(session, iteration))),
    ]
    if document:
        triples.append(_t(uri, TG + "document", _iri(document)))
    for predicate, value in (("inToken", in_token), ("outToken", out_token), ("llmModel", model)):
        if value is not None:
            triples.append(_t(uri, TG + predicate, _literal(value)))
    if memory:
        triples.append(_t(uri, RM + "memoryContext", _iri(memory_uri(session))))
    return triples


def memory_triples(session: str, used: Iterable[MemoryRef]) -> list[Triple]:
    """react-mem's own: each memory item the prompt held, with its kind, id and score."""
    uri = memory_uri(session)
    triples = [
        *_types(uri, "Memory in the prompt", RM + "MemoryContext"),
        _t(uri, DERIVED_FROM, _iri(session_uri(session))),
    ]
    for n, ref in enumerate(used, 1):
        item = f"{uri}/{n}"
        kind = MEMORY_TYPES.get(ref.kind, "Memory")
        triples += [
            _t(uri, RM + "usedMemory", _iri(item)),
            *_types(item, f"{kind}: {ref.id}", RM + kind),
            _t(item, RM + "memoryKind", _literal(ref.kind)),
            _t(item, RM + "memoryId", _literal(ref.id)),
            _t(item, RM + "content", _literal(ref.content)),
        ]
        if ref.score is not None:
            triples.append(_t(item, TG + "score", _literal(f"{ref.score:.4f}")))
        if ref.tokens is not None:
            triples.append(_t(item, RM + "tokens", _literal(ref.tokens)))
    return triples
