"""Export one JSON Schema file per wire message, and check exported files for drift.

Run ``python -m react_mem.schema.export [--check] [DIR]`` (``DIR`` defaults to ``schema``,
relative to the working directory, i.e. the repository's top-level ``schema/`` folder).

Schemas are generated in pydantic's *serialization* mode: they describe the JSON that
:meth:`WireModel.encode` writes, which is the shape TrustGraph's own writers produce (the
``schema`` alias of ``TextCompletionRequest.schema_``, every default spelled out). They are
the writer's contract. Readers are deliberately more lenient than any schema can say:
unknown keys are ignored, missing keys and ``null`` for non-nullable fields are defaulted.
No field is marked required, because a TrustGraph peer omits react-mem's extension fields.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from react_mem.schema import (
    agent,
    audit,
    config,
    forget,
    llm,
    ping,
    primitives,
    services,
    trajectory,
)
from react_mem.schema import consolidation as consolidation
from react_mem.schema import conversations as conversations
from react_mem.schema import episodes as episodes
from react_mem.schema import facts as facts
from react_mem.schema import playbook as playbook
from react_mem.schema import working as working
from react_mem.schema.base import WireModel

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_PREFIX = "urn:react-mem:schema:"

#: Every exported message, by name; the name is also the file stem.
MESSAGES: dict[str, type[WireModel]] = {}


def register(*models: type[WireModel]) -> None:
    """Add messages to the export; re-registering the same class is a no-op."""
    for model in models:
        known = MESSAGES.get(model.__name__)
        if known is not None and known is not model:
            raise ValueError(f"a different message is already registered as {model.__name__}")
        MESSAGES[model.__name__] = model


# TrustGraph messages react-mem speaks; later messages register themselves the same way.
register(agent.AgentRequest, agent.AgentStep, agent.PlanStep, agent.AgentResponse)
register(primitives.Error, primitives.Term, primitives.Triple)
register(llm.TextCompletionRequest, llm.TextCompletionResponse)
register(config.ConfigKey, config.ConfigValue, config.ConfigRequest, config.ConfigResponse)
register(config.WorkspaceChanges, config.ConfigPush)
register(ping.PingRequest, ping.PingResponse)
register(services.PromptRequest, services.PromptResponse, services.GraphRagQuery)
register(services.Source, services.GraphRagResponse, services.ToolRequest, services.ToolResponse)
register(services.StructuredQueryRequest, services.StructuredQueryResponse)
register(services.EmbeddingsRequest, services.EmbeddingsResponse, services.RowIndexMatch)
register(services.RowEmbeddingsRequest, services.RowEmbeddingsResponse)
register(services.ToolServiceRequest, services.ToolServiceResponse)
register(services.Metadata, services.Triples)
register(services.DocumentMetadata, services.LibrarianRequest, services.LibrarianResponse)
# react-mem's agent messages.
register(agent.MemoryRef, agent.MemoryState, trajectory.Trajectory)
# Forgetting a user and the audit trail.
register(forget.Forgotten, forget.ForgetRequest, forget.ForgetResponse, audit.AuditEvent)
# The memory services' own messages.
register(facts.FactInput, facts.Fact, facts.StoredFact, facts.FactRequest, facts.FactResponse)
register(working.WorkingMemoryRequest, working.WorkingMemoryResponse)
register(episodes.Episode, episodes.EpisodeRequest, episodes.EpisodeResponse)
register(episodes.EpisodeSearch, episodes.EpisodeHits)
register(conversations.ConversationTurn, conversations.Conversation)
register(conversations.ConversationRequest, conversations.ConversationResponse)
register(conversations.ConversationEnded, conversations.QuotaNotice)
register(consolidation.ConsolidationCluster, consolidation.ConsolidationReport)
register(playbook.Bullet, playbook.DeltaOperation, playbook.Delta, playbook.BulletChange)
register(playbook.DeltaRecord, playbook.Weights, playbook.PlaybookRequest)
register(playbook.PlaybookResponse, playbook.RubricResult, playbook.Feedback)


def message_schema(model: type[WireModel]) -> dict[str, Any]:
    """The JSON Schema of one message, with ``$schema``, ``$id`` and ``title`` set."""
    schema = model.model_json_schema(by_alias=True, mode="serialization")
    schema["$schema"] = JSON_SCHEMA_DIALECT
    schema["$id"] = ID_PREFIX + model.__name__
    schema["title"] = model.__name__
    return schema


def render_schemas() -> dict[str, str]:
    """File name -> file text for every registered message (deterministic)."""
    return {
        f"{name}.json": json.dumps(message_schema(model), indent=2, sort_keys=True) + "\n"
        for name, model in sorted(MESSAGES.items())
    }


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema into ``directory``, removing stale ``*.json`` files there."""
    directory.mkdir(parents=True, exist_ok=True)
    rendered = render_schemas()
    for stale in sorted(directory.glob("*.json")):
        if stale.name not in rendered:
            stale.unlink()
    written = []
    for name, text in rendered.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def check_schemas(directory: Path) -> list[str]:
    """Names of files in ``directory`` that differ from, are missing from, or extra to the
    rendered schemas; empty when the exported files are up to date."""
    rendered = render_schemas()
    present = {path.name for path in directory.glob("*.json")}
    drifted = {name for name in present if name not in rendered}
    for name, text in rendered.items():
        path = directory / name
        if name not in present or path.read_text(encoding="utf-8") != text:
            drifted.add(name)
    return sorted(drifted)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m react_mem.schema.export")
    parser.add_argument("--check", action="store_true", help="fail if files are out of date")
    parser.add_argument("directory", nargs="?", type=Path, default=Path("schema"))
    args = parser.parse_args(argv)
    directory: Path = args.directory
    if args.check:
        drifted = check_schemas(directory)
        if drifted:
            print(
                f"JSON Schemas in {directory} are out of date: {', '.join(drifted)}\n"
                f"regenerate with: python -m react_mem.schema.export {directory}",
                file=sys.stderr,
            )
            return 1
        return 0
    for path in write_schemas(directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
