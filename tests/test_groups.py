"""The shipped group files load: every class resolves and every setting validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_services.working.service import WorkingMemoryProcessor, WorkingMemorySettings
from react_mem.bus.in_process import InProcessTransport
from react_mem.processor.group import load_group
from react_mem.processor.settings import ProcessorSettings

GROUPS = Path(__file__).resolve().parent.parent / "config" / "groups"


@pytest.mark.parametrize(
    ("name", "ids"),
    [
        ("demo.yaml", ["config-svc", "ping"]),
        (
            "memory.yaml",
            [
                "fact-memory",
                "episode-memory",
                "conversation-memory",
                "playbook-memory",
                "working-memory",
            ],
        ),
        (
            "stack.yaml",
            [
                "config-svc",
                "text-completion",
                "agent-mem",
                "memory-learner",
                "fact-memory",
                "episode-memory",
                "conversation-memory",
                "playbook-memory",
                "working-memory",
            ],
        ),
    ],
)
def test_group_files_load(name: str, ids: list[str], tmp_path: Path) -> None:
    entries = load_group(GROUPS / name, shared={"state_dir": tmp_path})
    assert [e.settings.id for e in entries] == ids
    for entry in entries:
        assert entry.settings.state_dir == tmp_path
        flows = entry.settings.flows
        if flows is not None:  # the demo's ping takes its flow from the config service
            assert f"processor:{entry.settings.id}:" in flows.read_text()


def test_base_settings_are_revalidated_as_the_processors_own() -> None:
    processor = WorkingMemoryProcessor(
        ProcessorSettings.load({"id": "wm", "concurrency": 3}), InProcessTransport()
    )
    assert isinstance(processor.settings, WorkingMemorySettings)
    assert (processor.settings.concurrency, processor.settings.keep_recent) == (3, 3)
