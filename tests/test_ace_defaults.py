"""The ACE defaults have one source, and what every deployment runs is what was measured.

The playbook's tuning (:class:`PlaybookPolicy`), consolidation's thresholds and the agent's
``playbook-*`` keys are defaults in code; the embedded stack's group files, compose and the
chart set none of them, so they cannot drift apart (docs/ace.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from memory_services.consolidation.engine import IMPORTANCE_THRESHOLD, MIN_IMPORTANCE
from memory_services.consolidation.settings import ConsolidationSettings
from memory_services.episodes.episode_memory import CONSOLIDATION
from memory_services.episodes.service import EpisodeMemorySettings
from memory_services.facts.records import FactPolicy
from memory_services.facts.service import FactMemorySettings
from memory_services.playbook import seeds
from memory_services.playbook.playbook import ALWAYS
from memory_services.playbook.records import PlaybookPolicy
from memory_services.playbook.service import PlaybookMemorySettings
from memory_services.runtime import MemorySettings
from react_mem.agent.config import AgentMemConfig
from react_mem.agent.sources import setting
from tests.support.kinds import SOURCES

ROOT = Path(__file__).resolve().parents[1]

#: The keys no deployment file may set: the playbook's and consolidation's own settings.
TUNING = (set(PlaybookMemorySettings.model_fields) | set(ConsolidationSettings.model_fields)) - set(
    MemorySettings.model_fields
)


def _env(key: str) -> str:
    return "REACT_MEM_" + key.upper().replace("-", "_")


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of every mapping in a parsed YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key), value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _documents() -> Iterator[tuple[str, Any]]:
    files = [
        *sorted((ROOT / "config" / "groups").glob("*.yaml")),
        ROOT / "docker-compose.yml",
        *sorted((ROOT / "helm" / "react-mem").glob("values*.yaml")),
    ]
    for path in files:
        yield path.name, yaml.safe_load(path.read_text())


def test_no_deployment_file_sets_the_ace_tuning() -> None:
    assert "reinforcement_gain" in TUNING and "consolidation_importance" in TUNING
    env = {_env(k) for k in TUNING}
    found = []
    for name, doc in _documents():
        for key, value in _walk(doc):
            if key in ("params", "settings") and isinstance(value, dict):
                found += [(name, k) for k in value if k.replace("-", "_") in TUNING]
            if key in ("environment",) and isinstance(value, dict):
                found += [(name, k) for k in value if k in env]
            if key == "extraEnv" and isinstance(value, list):
                found += [(name, e.get("name")) for e in value if e.get("name") in env]
    assert found == []


def test_a_deployment_key_of_the_tuning_would_be_found() -> None:
    """The scan above sees a group file's params, compose's environment and helm's settings."""
    group = {"processors": [{"class": "playbook-memory", "params": {"reinforcement_gain": 0}}]}
    compose = {"services": {"x": {"environment": {"REACT_MEM_MIN_RELEVANCE": "0"}}}}
    helm = {"processors": {"fact-memory": {"settings": {"consolidation-importance": 0.7}}}}
    for doc in (group, compose, helm):
        keys = [k for k, v in _walk(doc) if isinstance(v, dict) for k in v]
        assert any(k.replace("-", "_") in TUNING or k in {_env(t) for t in TUNING} for k in keys)


def test_the_services_take_their_defaults_from_one_place() -> None:
    assert PlaybookMemorySettings.load({"id": "p"}).policy() == PlaybookPolicy()
    facts = FactMemorySettings.load({"id": "f"})
    policy = facts.policy()
    assert (policy.consolidation_importance, policy.consolidation_min_importance) == (
        FactPolicy().consolidation_importance,
        FactPolicy().consolidation_min_importance,
    )
    episodes = EpisodeMemorySettings.load({"id": "e"}).consolidation_options()
    assert episodes == CONSOLIDATION
    # Seed 002's thresholds: preserve at 0.8, merge below 0.5 (facts: one threshold, 0.8).
    assert (episodes.importance_threshold, episodes.min_importance) == (0.8, 0.5)
    assert (IMPORTANCE_THRESHOLD, MIN_IMPORTANCE) == (0.8, 0.5)
    assert (facts.consolidation_importance, facts.consolidation_min_importance) == (0.8, None)


def test_the_meta_strategy_seeds_are_on_by_default_and_apply_to_any_task() -> None:
    settings = PlaybookMemorySettings.load({"id": "p"})
    assert settings.seed_bullets == seeds.DEFAULT and seeds.DEFAULT.is_file()
    operations = seeds.load(seeds.DEFAULT)
    assert len(operations) >= 3 and all(ALWAYS in op.tags for op in operations)
    for off in ("none", ""):
        assert PlaybookMemorySettings.load({"id": "p", "seed_bullets": off}).seed_bullets is None


def test_agent_mem_playbook_keys_in_the_shipped_flows_are_the_agents_defaults() -> None:
    """The embedded stack's flows may set agent-mem keys; the playbook's must equal the
    agent's defaults (the TrustGraph file is compared in test_trustgraph_config)."""
    defaults = AgentMemConfig.parse({}, keys=SOURCES.keys)
    for path in sorted((ROOT / "config" / "flows").glob("*.yaml")):
        for key, value in _walk(yaml.safe_load(path.read_text())):
            if key != "agent-mem" or not isinstance(value, dict):
                continue
            playbook = {k: str(v) for k, v in value.items() if k.startswith("playbook-")}
            if playbook:
                parsed = AgentMemConfig.parse(playbook, keys=SOURCES.keys)
                for k in playbook:
                    assert setting(parsed, k) == setting(defaults, k), (path.name, k)


@pytest.mark.parametrize("field", ["reinforcement_gain", "min_relevance", "harmful_margin"])
def test_the_measured_playbook_defaults_are_on(field: str) -> None:
    """Harmful marks demote, unrelated bullets stay out, harmful bullets are pruned: all
    by default (the values are chosen in docs/ace.md)."""
    assert getattr(PlaybookPolicy(), field) > 0
