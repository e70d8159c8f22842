"""Contract tests: the bytes on the wire, lenient decoding, errors and the exported schemas.

The pinned payloads are exactly what TrustGraph's writers put on the bus: ``json.dumps``
(default separators, ASCII escapes) of ``dataclass_to_dict``, i.e. every field in
declaration order with ``null`` for None. react-mem's own trailing extension fields on
``AgentRequest`` (``enable_memory``, ``user``, ``context_scope_id``, ``memory``) appear as ``null`` when unset.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from react_mem.errors import BadRequest
from react_mem.schema import (
    MAX_MESSAGE_BYTES,
    AgentRequest,
    AgentResponse,
    AgentStep,
    ConfigKey,
    ConfigPush,
    ConfigRequest,
    ConfigResponse,
    ConfigValue,
    Error,
    PlanStep,
    Term,
    TextCompletionRequest,
    TextCompletionResponse,
    Triple,
    WireModel,
    WorkspaceChanges,
)
from react_mem.schema.export import MESSAGES, check_schemas, main, register, write_schemas

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schema"

# --- pinned payloads --------------------------------------------------------------------

AGENT_REQUEST = (
    '{"question": "Where is the caf\\u00e9?", "state": "", "group": ["search"], '
    '"history": [{"thought": "I should search", "action": "search", '
    '"arguments": {"query": "caf\\u00e9"}, "observation": "Rue 1", "step_type": "react", '
    '"plan": [], "subagent_results": {}}], "collection": "default", "streaming": true, '
    '"session_id": "s-1", "conversation_id": "", "pattern": "react", "task_type": "", '
    '"framing": "", "correlation_id": "", "parent_session_id": "", "subagent_goal": "", '
    '"expected_siblings": 0, "enable_memory": null, "user": null, "context_scope_id": null, "memory": null}'
)
AGENT_REQUEST_MODEL = AgentRequest(
    question="Where is the café?",
    group=["search"],
    history=[
        AgentStep(
            thought="I should search",
            action="search",
            arguments={"query": "café"},
            observation="Rue 1",
            step_type="react",
        )
    ],
    streaming=True,
    session_id="s-1",
    pattern="react",
)
# The same request as a TrustGraph peer sends it: without react-mem's extension fields.
AGENT_REQUEST_FROM_TRUSTGRAPH = AGENT_REQUEST.replace(
    ', "enable_memory": null, "user": null, "context_scope_id": null, "memory": null', ""
)

AGENT_REQUEST_WITH_MEMORY = (
    '{"question": "hi", "state": "", "group": null, "history": [], "collection": "default", '
    '"streaming": false, "session_id": "", "conversation_id": "", "pattern": "", '
    '"task_type": "", "framing": "", "correlation_id": "", "parent_session_id": "", '
    '"subagent_goal": "", "expected_siblings": 0, "enable_memory": true, "user": "alice", '
    '"context_scope_id": null, "memory": null}'
)
AGENT_REQUEST_WITH_MEMORY_MODEL = AgentRequest(question="hi", enable_memory=True, user="alice")

AGENT_STEP_PLAN = (
    '{"thought": "Plan first", "action": "", "arguments": {}, "observation": "", '
    '"step_type": "plan", "plan": [{"goal": "find it", "tool_hint": "search", '
    '"depends_on": [], "status": "completed", "result": "Rue 1"}, {"goal": "answer", '
    '"tool_hint": "", "depends_on": [0], "status": "pending", "result": ""}], '
    '"subagent_results": {"find it": "Rue 1"}}'
)
AGENT_STEP_PLAN_MODEL = AgentStep(
    thought="Plan first",
    step_type="plan",
    plan=[
        PlanStep(goal="find it", tool_hint="search", status="completed", result="Rue 1"),
        PlanStep(goal="answer", depends_on=[0]),
    ],
    subagent_results={"find it": "Rue 1"},
)

AGENT_RESPONSE_ERROR = (
    '{"message_type": "error", "content": "", "end_of_message": true, "end_of_dialog": true, '
    '"explain_id": null, "explain_graph": null, "explain_triples": [], "message_id": "", '
    '"error": {"type": "agent-error", "message": "LLM unavailable"}, "in_token": null, '
    '"out_token": null, "model": null}'
)
AGENT_RESPONSE_ERROR_MODEL = AgentResponse(
    message_type="error",
    end_of_message=True,
    end_of_dialog=True,
    error=Error(type="agent-error", message="LLM unavailable"),
)

AGENT_RESPONSE_ANSWER = (
    '{"message_type": "answer", "content": "Rue 1", "end_of_message": true, '
    '"end_of_dialog": true, "explain_id": null, "explain_graph": null, '
    '"explain_triples": [], "message_id": "m-9", "error": null, "in_token": 120, '
    '"out_token": 8, "model": "gpt-x"}'
)
AGENT_RESPONSE_ANSWER_MODEL = AgentResponse(
    message_type="answer",
    content="Rue 1",
    end_of_message=True,
    end_of_dialog=True,
    message_id="m-9",
    in_token=120,
    out_token=8,
    model="gpt-x",
)

AGENT_RESPONSE_EXPLAIN = (
    '{"message_type": "explain", "content": "", "end_of_message": true, '
    '"end_of_dialog": false, "explain_id": "urn:x:1", "explain_graph": "urn:graph:retrieval", '
    '"explain_triples": [{"s": {"type": "i", "iri": "urn:x:1", "id": "", "value": "", '
    '"datatype": "", "language": "", "triple": null}, "p": {"type": "i", '
    '"iri": "urn:p:label", "id": "", "value": "", "datatype": "", "language": "", '
    '"triple": null}, "o": {"type": "l", "iri": "", "id": "", "value": "Caf\\u00e9", '
    '"datatype": "", "language": "fr", "triple": null}, "g": null}], "message_id": "", '
    '"error": null, "in_token": null, "out_token": null, "model": null}'
)
AGENT_RESPONSE_EXPLAIN_MODEL = AgentResponse(
    message_type="explain",
    end_of_message=True,
    explain_id="urn:x:1",
    explain_graph="urn:graph:retrieval",
    explain_triples=[
        Triple(
            s=Term(type="i", iri="urn:x:1"),
            p=Term(type="i", iri="urn:p:label"),
            o=Term(type="l", value="Café", language="fr"),
        )
    ],
)

TEXT_COMPLETION_REQUEST = (
    '{"system": "Be brief.", "prompt": "Say hi", "streaming": false, '
    '"response_format": "json", "schema": {"type": "object", '
    '"properties": {"greeting": {"type": "string"}}, "required": ["greeting"]}, "timeout": null, '
    '"priority": null}'
)
TEXT_COMPLETION_REQUEST_MODEL = TextCompletionRequest(
    system="Be brief.",
    prompt="Say hi",
    response_format="json",
    schema={
        "type": "object",
        "properties": {"greeting": {"type": "string"}},
        "required": ["greeting"],
    },
)

TEXT_COMPLETION_REQUEST_PLAIN = (
    '{"system": "", "prompt": "Say hi", "streaming": true, "response_format": null, "schema": null, '
    '"timeout": 30.0, "priority": null}'
)
TEXT_COMPLETION_REQUEST_PLAIN_MODEL = TextCompletionRequest(
    prompt="Say hi", streaming=True, timeout=30.0
)

TEXT_COMPLETION_RESPONSE = (
    '{"error": null, "response": "Hi!", "in_token": 12, "out_token": 3, "model": "m-1", '
    '"end_of_stream": true}'
)
TEXT_COMPLETION_RESPONSE_MODEL = TextCompletionResponse(
    response="Hi!", in_token=12, out_token=3, model="m-1", end_of_stream=True
)

CONFIG_REQUEST = (
    '{"operation": "get", "workspace": "default", "keys": [{"type": "prompt", '
    '"key": "system"}], "type": "", "values": []}'
)
CONFIG_REQUEST_MODEL = ConfigRequest(
    operation="get", workspace="default", keys=[ConfigKey(type="prompt", key="system")]
)

CONFIG_RESPONSE = (
    '{"version": 7, "values": [{"type": "prompt", "key": "system", "value": "Be kind", '
    '"workspace": ""}], "directory": [], "config": {"prompt": {"system": "Be kind"}}, '
    '"error": null}'
)
CONFIG_RESPONSE_MODEL = ConfigResponse(
    version=7,
    values=[ConfigValue(type="prompt", key="system", value="Be kind")],
    config={"prompt": {"system": "Be kind"}},
)

CONFIG_RESPONSE_ERROR = (
    '{"version": 0, "values": [], "directory": [], "config": {}, '
    '"error": {"type": "key-error", "message": "no such key"}}'
)
CONFIG_RESPONSE_ERROR_MODEL = ConfigResponse(error=Error(type="key-error", message="no such key"))

CONFIG_PUSH = (
    '{"version": 8, "changes": {"prompt": ["default", "ws-b"]}, '
    '"workspace_changes": {"created": ["ws-b"], "deleted": []}}'
)
CONFIG_PUSH_MODEL = ConfigPush(
    version=8,
    changes={"prompt": ["default", "ws-b"]},
    workspace_changes=WorkspaceChanges(created=["ws-b"]),
)

PINNED: list[tuple[str, WireModel]] = [
    (AGENT_REQUEST, AGENT_REQUEST_MODEL),
    (AGENT_REQUEST_WITH_MEMORY, AGENT_REQUEST_WITH_MEMORY_MODEL),
    (AGENT_STEP_PLAN, AGENT_STEP_PLAN_MODEL),
    (AGENT_RESPONSE_ERROR, AGENT_RESPONSE_ERROR_MODEL),
    (AGENT_RESPONSE_ANSWER, AGENT_RESPONSE_ANSWER_MODEL),
    (AGENT_RESPONSE_EXPLAIN, AGENT_RESPONSE_EXPLAIN_MODEL),
    (TEXT_COMPLETION_REQUEST, TEXT_COMPLETION_REQUEST_MODEL),
    (TEXT_COMPLETION_REQUEST_PLAIN, TEXT_COMPLETION_REQUEST_PLAIN_MODEL),
    (TEXT_COMPLETION_RESPONSE, TEXT_COMPLETION_RESPONSE_MODEL),
    (CONFIG_REQUEST, CONFIG_REQUEST_MODEL),
    (CONFIG_RESPONSE, CONFIG_RESPONSE_MODEL),
    (CONFIG_RESPONSE_ERROR, CONFIG_RESPONSE_ERROR_MODEL),
    (CONFIG_PUSH, CONFIG_PUSH_MODEL),
]
PINNED_IDS = [f"{type(model).__name__}-{i}" for i, (_, model) in enumerate(PINNED)]


@pytest.mark.parametrize(("wire", "model"), PINNED, ids=PINNED_IDS)
def test_encode_gives_pinned_bytes(wire: str, model: WireModel) -> None:
    assert model.encode() == wire.encode("ascii")


@pytest.mark.parametrize(("wire", "model"), PINNED, ids=PINNED_IDS)
def test_decode_pinned_bytes_round_trips(wire: str, model: WireModel) -> None:
    decoded = type(model).decode(wire.encode("ascii"))
    assert decoded == model
    assert decoded.encode() == wire.encode("ascii")


def test_pinned_key_order_is_declaration_order() -> None:
    keys = list(json.loads(AGENT_REQUEST))
    assert keys == list(AgentRequest.model_fields)
    assert keys[-4:] == ["enable_memory", "user", "context_scope_id", "memory"]


# --- decoding what a TrustGraph peer sends ------------------------------------------------


def test_trustgraph_request_without_extensions_decodes() -> None:
    decoded = AgentRequest.decode(AGENT_REQUEST_FROM_TRUSTGRAPH.encode())
    assert decoded == AGENT_REQUEST_MODEL
    assert decoded.enable_memory is None
    assert decoded.user is None


def test_unknown_keys_are_ignored() -> None:
    payload = json.loads(AGENT_RESPONSE_ANSWER)
    payload["added_in_a_later_trustgraph"] = {"nested": [1, 2]}
    payload["error"] = {"type": "x", "message": "y", "trace": "ignored too"}
    decoded = AgentResponse.decode(json.dumps(payload).encode())
    assert decoded.content == "Rue 1"
    assert decoded.error == Error(type="x", message="y")
    assert "added_in_a_later_trustgraph" not in decoded.to_wire()


def test_missing_keys_are_defaulted() -> None:
    decoded = AgentRequest.decode(b'{"question": "hi"}')
    assert decoded == AgentRequest(question="hi")
    assert decoded.collection == "default"
    assert decoded.history == []
    assert decoded.group is None
    assert ConfigPush.decode(b"{}") == ConfigPush()
    assert PlanStep.decode(b'{"goal": "g"}').status == "pending"


def test_null_for_non_nullable_field_is_defaulted() -> None:
    decoded = AgentRequest.decode(
        b'{"question": "hi", "state": null, "collection": null, "history": null, '
        b'"expected_siblings": null, "streaming": null, "group": null}'
    )
    assert decoded.state == ""
    assert decoded.collection == "default"
    assert decoded.history == []
    assert decoded.expected_siblings == 0
    assert decoded.streaming is False
    nested = AgentRequest.decode(b'{"history": [{"thought": null, "arguments": null}]}')
    assert nested.history == [AgentStep()]


def test_nested_dataclass_dicts_are_parsed() -> None:
    decoded = AgentRequest.decode(
        b'{"question": "q", "history": [{"thought": "t1", "plan": [{"goal": "g", '
        b'"depends_on": [1, 2]}]}, {"action": "search", "arguments": {"k": "v"}}]}'
    )
    assert [type(step) for step in decoded.history] == [AgentStep, AgentStep]
    assert decoded.history[0].plan == [PlanStep(goal="g", depends_on=[1, 2])]
    assert decoded.history[1].arguments == {"k": "v"}
    response = TextCompletionResponse.decode(b'{"error": {"type": "llm-error", "message": "m"}}')
    assert isinstance(response.error, Error)
    assert response.error.type == "llm-error"
    push = ConfigPush.decode(b'{"version": 3, "workspace_changes": {"deleted": ["w"]}}')
    assert push.workspace_changes == WorkspaceChanges(deleted=["w"])


def test_quoted_triple_term_round_trips() -> None:
    inner = Triple(s=Term(type="i", iri="urn:a"), p=Term(type="i", iri="urn:b"), g="urn:g")
    term = Term(type="t", triple=inner)
    decoded = Term.decode(term.encode())
    assert decoded.triple == inner


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "data", "kind", "fragment"),
    [
        (AgentRequest, b'{"question": ', "malformed", "not valid JSON"),
        (AgentRequest, b'{"question": "\xff"}', "malformed", "not valid JSON"),
        (AgentRequest, b'[{"question": "hi"}]', "malformed", "expected a JSON object, got list"),
        (AgentRequest, b'"hi"', "malformed", "expected a JSON object, got str"),
        (AgentRequest, b'{"expected_siblings": "many"}', "invalid", "expected_siblings"),
        (AgentRequest, b'{"history": "x"}', "invalid", "history"),
        (AgentRequest, b'{"history": [{"plan": [{"depends_on": ["a"]}]}]}', "invalid", "plan"),
        (ConfigPush, b'{"changes": {"prompt": "default"}}', "invalid", "changes.prompt"),
        (TextCompletionRequest, b'{"schema": "json"}', "invalid", "schema"),
    ],
)
def test_bad_input_raises_bad_request(
    model: type[WireModel], data: bytes, kind: str, fragment: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        model.decode(data)
    assert caught.value.type == kind
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(model.__name__)


def test_oversized_payload_is_rejected_before_parsing() -> None:
    body = b'{"question": "' + b"x" * MAX_MESSAGE_BYTES + b'"}'
    with pytest.raises(BadRequest) as caught:
        AgentRequest.decode(body)
    assert caught.value.type == "too-large"
    assert str(MAX_MESSAGE_BYTES) in str(caught.value)
    at_limit = b'{"question": "' + b"x" * (MAX_MESSAGE_BYTES - 16) + b'"}'
    assert len(AgentRequest.decode(at_limit).question) == MAX_MESSAGE_BYTES - 16


# --- exported JSON Schemas --------------------------------------------------------------


def test_every_wire_message_is_registered() -> None:
    expected = {
        "AgentRequest", "AgentStep", "PlanStep", "AgentResponse", "Error", "Term", "Triple",
        "TextCompletionRequest", "TextCompletionResponse", "ConfigKey", "ConfigValue",
        "ConfigRequest", "ConfigResponse", "WorkspaceChanges", "ConfigPush",
    }  # fmt: skip
    assert expected <= set(MESSAGES)


def test_register_refuses_a_different_class_under_a_taken_name() -> None:
    class AgentRequest(WireModel):  # same name, different message
        question: str = ""

    register(MESSAGES["AgentRequest"])  # the same class again is fine
    with pytest.raises(ValueError, match="AgentRequest"):
        register(AgentRequest)


def test_committed_schemas_have_not_drifted() -> None:
    drifted = check_schemas(SCHEMA_DIR)
    assert drifted == [], (
        f"regenerate with `python -m react_mem.schema.export`; out of date: {drifted}"
    )


def test_check_schemas_reports_changed_missing_and_extra_files(tmp_path: Path) -> None:
    written = write_schemas(tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{name}.json" for name in MESSAGES)
    assert check_schemas(tmp_path) == []
    (tmp_path / "Error.json").write_text("{}\n")
    (tmp_path / "Term.json").unlink()
    (tmp_path / "Removed.json").write_text("{}\n")
    assert check_schemas(tmp_path) == ["Error.json", "Removed.json", "Term.json"]
    assert main(["--check", str(tmp_path)]) == 1
    assert main([str(tmp_path)]) == 0
    assert check_schemas(tmp_path) == []
    assert main(["--check", str(tmp_path)]) == 0


def _schema(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((SCHEMA_DIR / f"{name}.json").read_text())
    return loaded


def test_schema_files_carry_identity() -> None:
    schema = _schema("Term")
    assert schema["title"] == "Term"
    assert schema["$id"] == "urn:react-mem:schema:Term"
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(("wire", "model"), PINNED, ids=PINNED_IDS)
def test_pinned_payload_validates_against_exported_schema(wire: str, model: WireModel) -> None:
    validator = jsonschema.Draft202012Validator(_schema(type(model).__name__))
    validator.validate(json.loads(wire))


def test_trustgraph_payload_validates_against_exported_schema() -> None:
    validator = jsonschema.Draft202012Validator(_schema("AgentRequest"))
    validator.validate(json.loads(AGENT_REQUEST_FROM_TRUSTGRAPH))


@pytest.mark.parametrize(
    ("name", "wire", "key", "bad"),
    [
        ("AgentRequest", AGENT_REQUEST, "expected_siblings", "many"),
        ("AgentRequest", AGENT_REQUEST, "history", "x"),
        ("AgentResponse", AGENT_RESPONSE_ERROR, "error", "boom"),
        ("TextCompletionRequest", TEXT_COMPLETION_REQUEST, "schema", "json"),
        ("ConfigPush", CONFIG_PUSH, "changes", {"prompt": "default"}),
    ],
)
def test_wrong_type_fails_exported_schema(name: str, wire: str, key: str, bad: object) -> None:
    payload = json.loads(wire)
    payload[key] = bad
    validator = jsonschema.Draft202012Validator(_schema(name))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(payload)
