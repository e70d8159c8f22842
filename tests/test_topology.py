"""The queue topology is described once (``react_mem.commands.topology``): the committed
flow files and the TrustGraph blueprint are what it generates, and a change to the
description shows as a difference."""

from __future__ import annotations

import json

import pytest
import yaml

from react_mem.commands import topology


def test_committed_files_are_what_the_description_generates() -> None:
    files = topology.generated()
    stale = [p for p, text in files.items() if p.read_text(encoding="utf-8") != text]
    assert not stale, f"run `python -m react_mem.commands.topology --write`: {stale}"
    assert topology.main(["--check"]) == 0
    assert {p.name for p in files} >= {"stack.yaml", "flow-blueprint.json", "fact-memory.yaml"}


def test_a_changed_description_is_a_difference(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = topology.Node("note-memory", (*topology.serves("note-memory"), topology.AUDIT))
    monkeypatch.setattr(topology, "NODES", (*topology.NODES, extra))
    assert topology.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "stack.yaml" in out and "flow-blueprint.json" in out
    stack = yaml.safe_load(topology.generated()[topology.FLOWS / "stack.yaml"])
    assert stack["default"]["processor:note-memory"]["default"]["topics"] == {
        "request": "request:tg:note-memory:default:default",
        "response": "response:tg:note-memory:default:default",
        "audit": "flow:tg:memory-audit:default:default",
    }


def test_every_wired_queue_has_a_processor_at_its_other_end() -> None:
    """A client's request queue is some processor's request queue, in stack and blueprint."""
    served = {t.queue("w", "f") for n in topology.NODES for t in n.topics if t.spec == "request"}
    for n in topology.NODES:
        for t in n.topics:
            if t.spec.endswith("-request"):
                assert t.queue("w", "f") in served, (n.id, t.spec)
    blueprint = json.loads(topology.generated()[topology.BLUEPRINT])
    assert "text-completion:{id}" not in blueprint["flow"]  # TrustGraph runs its own
    agent = blueprint["flow"]["agent-mem:{id}"]["topics"]
    assert agent["prompt-request"] == "request:tg:prompt-rag:{workspace}:{id}"


def test_a_new_memory_service_reaches_the_group_compose_and_chart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deployment lists of memory services come from the description too."""
    extra = topology.Node(
        "note-memory", topology.serves("note-memory"), deploy=topology.Deploy(concurrency=3)
    )
    monkeypatch.setattr(topology, "NODES", (*topology.NODES, extra))
    files = topology.generated()
    group = yaml.safe_load(files[topology.GROUP])["processors"]
    assert group[-1] == {"class": "note-memory", "params": {"id": "note-memory", "concurrency": 3}}
    assert [e["class"] for e in group[:4]] == [  # the hand-kept entries stay
        "config-service",
        "text-completion-llama-cpp",
        "agent-mem",
        "memory-learner",
    ]
    services = yaml.safe_load(files[topology.COMPOSE])["services"]
    assert services["note-memory"]["command"] == ["run", "note-memory"]
    assert (
        services["note-memory"]["environment"]["QDRANT_URL"] == "${QDRANT_URL:-http://qdrant:6333}"
    )
    assert {"rabbitmq", "prometheus", "agent-mem"} <= services.keys()
    assert "note-memory" in files[topology.HELM_FLOWS].rsplit("storeProcessors", 1)[1]
    names = yaml.safe_load(files[topology.PROMETHEUS])["scrape_configs"][0]["dns_sd_configs"]
    assert names[0]["names"][-1] == "note-memory"
    schema = json.loads(files[topology.SCHEMA])["properties"]["processors"]["properties"]
    assert {"note-memory", "config-service", "agent-mem"} <= schema.keys()
    own = yaml.safe_load(files[topology.MEMORY_GROUP])["processors"][-1]["params"]
    assert own["flows"] == "../flows/note-memory.yaml"
    assert (
        "processor:note-memory"
        in yaml.safe_load(files[topology.FLOWS / "note-memory.yaml"])["default"]
    )
