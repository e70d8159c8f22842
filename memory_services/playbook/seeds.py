"""Seed bullets (seed 001's meta-strategy enhancement): a YAML or JSON file holding a list
of ``{content, section, tags, memory_type}``, written into each playbook the first time it
is used, as a delta of its own (source ``seed``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from pydantic import ValidationError

from memory_services.playbook.records import ScopeKey
from react_mem.errors import ConfigurationError
from react_mem.schema.playbook import Delta, DeltaOperation

FIELDS = ("content", "section", "tags", "memory_type", "topic", "concept")
#: Seed 001's meta-strategies, shipped inside the package: every playbook starts with them.
DEFAULT = Path(__file__).with_name("seed.yaml")


def load(path: Path) -> list[DeltaOperation]:
    """The seed file's bullets as ADD operations; a bad file is a configuration error."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"setting 'seed_bullets': cannot read {path}: {exc}") from exc
    if isinstance(data, dict) and "bullets" in data:
        data = data["bullets"]
    if not isinstance(data, list):
        raise ConfigurationError(f"setting 'seed_bullets': {path} must hold a list of bullets")
    operations = []
    for n, item in enumerate(data):
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, dict) or not str(item.get("content") or "").strip():
            raise ConfigurationError(f"setting 'seed_bullets': entry {n} of {path} has no content")
        unknown = sorted(set(item) - set(FIELDS))
        if unknown:
            raise ConfigurationError(
                f"setting 'seed_bullets': entry {n} of {path} has unknown keys {unknown}"
            )
        try:
            operations.append(DeltaOperation.model_validate({"type": "ADD", **item}))
        except ValidationError as exc:
            raise ConfigurationError(
                f"setting 'seed_bullets': entry {n} of {path}: {exc.errors()[0]['msg']}"
            ) from exc
    return operations


def seed_delta(key: ScopeKey, operations: list[DeltaOperation]) -> Delta:
    """The seed delta of a playbook: its id derives from the scope, so it applies once."""
    digest = hashlib.sha256(f"{key.workspace}\x1f{key.collection}\x1f{key.context}".encode())
    return Delta(
        delta_id=f"seed:{digest.hexdigest()[:16]}",
        operations=operations,
        source="seed",
        reason="seed bullets for a new playbook",
    )
