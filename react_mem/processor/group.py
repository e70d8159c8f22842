"""Processor groups: several processors in one process from a YAML file (TrustGraph's shape).

processors:
  - class: ping              # a short name or module.Class
    params: {id: ping, flows: config/flows/demo.yaml, concurrency: 4}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from react_mem.errors import ConfigurationError
from react_mem.processor.kinds import MemoryKinds
from react_mem.processor.runtime import ProcessorEntry, resolve_processor


def load_group(
    path: Path,
    *,
    kinds: MemoryKinds | None = None,
    settings_file: Path | None = None,
    shared: dict[str, Any] | None = None,
) -> list[ProcessorEntry]:
    """Read a group file. ``shared`` settings (the group's bus, given on its command line)
    apply to every processor, since they all share one bus connection. ``kinds``: the
    memory kinds read at start-up (by default the installed ones, read now)."""
    if kinds is None:
        kinds = MemoryKinds.from_entry_points()
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"cannot read group file {path}: {exc}") from exc
    entries = data.get("processors") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigurationError(f"group file {path}: 'processors' must be a non-empty list")
    result = []
    for n, entry in enumerate(entries):
        where = f"group file {path}: processors[{n}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("class"), str):
            raise ConfigurationError(f"{where}: needs a 'class'")
        params: dict[str, Any] = dict(entry.get("params") or {}) | (shared or {})
        if "id" not in params:
            raise ConfigurationError(f"{where}: params.id is required (it labels metrics)")
        cls = resolve_processor(entry["class"], kinds)
        for key in cls.Settings.group_relative:
            if isinstance(params.get(key), str):
                params[key] = (path.parent / params[key]).resolve()
        try:
            settings = cls.Settings.load(params, file=settings_file)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from exc
        result.append(ProcessorEntry(cls, settings, kinds))
    return result
