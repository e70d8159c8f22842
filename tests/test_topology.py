"""The queue topology is described once (``devtools/topology.py``, a development tool run from
the repository's root, not part of the installed package): the committed
flow files and the TrustGraph blueprint are what it generates, and a change to the
description shows as a difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from devtools import topology
from memory_services.facts.kind import processor
from react_mem.processor.kinds import Deploy, MemoryKind, MemoryKinds, Resources

INSTALLED = MemoryKinds.from_entry_points()
ROOT = Path(__file__).resolve().parent.parent
CHECK = ["--check", "--root", str(ROOT)]
NOTES = MemoryKind(
    name="note-memory",
    processor=processor,
    position=99,
    deploy=Deploy(concurrency=3, resources=Resources(cpu="50m")),
    agent_client=True,
)


@pytest.fixture
def notes() -> MemoryKinds:
    """The installed kinds and one more: what its one entry point would add."""
    return INSTALLED.plus(NOTES)


def test_committed_files_are_what_the_description_generates() -> None:
    files = topology.generated(ROOT, INSTALLED)
    stale = [p for p, text in files.items() if (ROOT / p).read_text(encoding="utf-8") != text]
    assert not stale, f"run `python -m devtools.topology --write`: {stale}"
    assert topology.main(CHECK) == 0
    assert {p.name for p in files} >= {"stack.yaml", "flow-blueprint.json", "fact-memory.yaml"}


def test_a_new_kind_is_a_difference(notes: MemoryKinds, capsys: pytest.CaptureFixture[str]) -> None:
    assert topology.main(CHECK, notes) == 1
    out = capsys.readouterr().out
    assert "stack.yaml" in out and "flow-blueprint.json" in out and "values.yaml" in out
    stack = yaml.safe_load(topology.generated(ROOT, notes)[topology.FLOWS / "stack.yaml"])[
        "default"
    ]
    assert stack["processor:note-memory"]["default"]["topics"] == {
        "request": "request:tg:note-memory:default:default",
        "response": "response:tg:note-memory:default:default",
        "audit": "flow:tg:memory-audit:default:default",
    }
    agent = stack["processor:agent-mem"]["default"]["topics"]
    assert agent["note-memory-request"] == "request:tg:note-memory:default:default"


def test_every_wired_queue_has_a_processor_at_its_other_end() -> None:
    """A client's request queue is some processor's request queue, in stack and blueprint."""
    nodes = topology.nodes(INSTALLED)
    served = {t.queue("w", "f") for n in nodes for t in n.topics if t.spec == "request"}
    for n in nodes:
        for t in n.topics:
            if t.spec.endswith("-request"):
                assert t.queue("w", "f") in served, (n.id, t.spec)
    blueprint = json.loads(topology.generated(ROOT, INSTALLED)[topology.BLUEPRINT])
    assert "text-completion:{id}" not in blueprint["flow"]  # TrustGraph runs its own
    agent = blueprint["flow"]["agent-mem:{id}"]["topics"]
    assert agent["prompt-request"] == "request:tg:prompt-rag:{workspace}:{id}"


def test_the_memory_services_are_the_installed_kinds() -> None:
    names = [k.name for k in INSTALLED]
    assert names == [
        "fact-memory",
        "episode-memory",
        "conversation-memory",
        "playbook-memory",
        "working-memory",
    ]
    assert [n for n, _ in topology.memory_services(INSTALLED)] == names
    assert set(topology.interfaces(INSTALLED)) == {"agent", *names} - {"working-memory"}


def test_a_new_memory_kind_reaches_the_group_compose_chart_and_alerts(notes: MemoryKinds) -> None:
    """The deployment lists of memory services come from the kinds too."""
    files = topology.generated(ROOT, notes)
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
    values = yaml.safe_load(files[topology.VALUES])["processors"]
    assert values["note-memory"]["concurrency"] == 3
    assert values["note-memory"]["resources"]["requests"] == {"cpu": "50m", "memory": "768Mi"}
    assert values["agent-mem"]["enabled"] is True  # the hand-kept entries stay
    watched = "fact-memory|episode-memory|conversation-memory|playbook-memory|note-memory"
    assert f'processor=~"{watched}"' in files[topology.ALERTS]


def test_it_writes_only_into_a_checkout_of_this_repository(tmp_path: Path) -> None:
    (tmp_path / "docker-compose.yml").write_text("services: {}\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="not the react-mem repository"):
        topology.main(["--write", "--root", str(tmp_path)])
    assert (tmp_path / "docker-compose.yml").read_text(encoding="utf-8") == "services: {}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-compose.yml"]
