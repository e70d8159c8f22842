"""The config store: ``{workspace: {type: {key: value}}}`` and a version, in one JSON file.

Every change is written to a temporary file, fsynced and renamed over the old one before
it becomes visible, so whatever a caller was told succeeded survives a killed process.
The in-memory state is replaced whole (copy on write), so readers on the event loop
always see one consistent version while a writer runs in a thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from react_mem.errors import ConfigurationError, TransientError
from react_mem.processor.config_source import WorkspaceConfig, read_config_file

Config = dict[str, WorkspaceConfig]
FILE_NAME = "config.json"


class _StoreFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    version: int = Field(default=0, ge=0)
    config: Config = Field(default_factory=dict)


class ConfigStore:
    """A persistent config store; writes are atomic and bump the version by one."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._state: tuple[int, Config] = self._load()

    @classmethod
    def open(cls, data_dir: Path, seed: Path | None = None) -> ConfigStore:
        """Open (creating ``data_dir``); a never-written store is seeded from a flow file."""
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(f"config store {data_dir}: {exc}") from exc
        store = cls(data_dir)
        if seed is not None and store.version == 0 and not store.snapshot():
            store.replace_all(read_config_file(seed))
        return store

    def _load(self) -> tuple[int, Config]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0, {}
        except OSError as exc:
            raise ConfigurationError(f"cannot read config store {self.path}: {exc}") from exc
        try:
            stored = _StoreFile.model_validate_json(text)
        except ValidationError as exc:
            raise ConfigurationError(f"config store {self.path} is corrupt: {exc}") from exc
        return stored.version, stored.config

    # -- reads -----------------------------------------------------------------
    @property
    def version(self) -> int:
        return self._state[0]

    def snapshot(self) -> Config:
        """The whole config; callers must not modify it."""
        return self._state[1]

    def workspace(self, workspace: str) -> tuple[int, WorkspaceConfig]:
        version, config = self._state
        return version, {t: dict(kv) for t, kv in config.get(workspace, {}).items()}

    def get(self, workspace: str, kind: str, key: str) -> str | None:
        return self._state[1].get(workspace, {}).get(kind, {}).get(key)

    def items(self, workspace: str, kind: str) -> list[tuple[str, str]]:
        """``(key, value)`` pairs of one type in one workspace, by key."""
        return sorted(self._state[1].get(workspace, {}).get(kind, {}).items())

    def items_all_workspaces(self, kind: str) -> list[tuple[str, str, str]]:
        """``(workspace, key, value)`` for one type across every workspace, sorted."""
        return sorted(
            (workspace, key, value)
            for workspace, types in self._state[1].items()
            for key, value in types.get(kind, {}).items()
        )

    # -- writes ----------------------------------------------------------------
    def put(self, workspace: str, values: Iterable[tuple[str, str, str]]) -> int:
        """Set ``(type, key, value)`` entries in ``workspace``; return the new version."""
        version, config = self._state
        changed = {t: dict(kv) for t, kv in config.get(workspace, {}).items()}
        for kind, key, value in values:
            changed.setdefault(kind, {})[key] = value
        return self._commit(version + 1, config | {workspace: changed} if changed else config)

    def delete(self, workspace: str, keys: Iterable[tuple[str, str]]) -> int:
        """Remove ``(type, key)`` entries (absent ones are ignored); return the new version."""
        version, config = self._state
        changed = {t: dict(kv) for t, kv in config.get(workspace, {}).items()}
        for kind, key in keys:
            entries = changed.get(kind)
            if entries is not None:
                entries.pop(key, None)
                if not entries:
                    del changed[kind]
        new = {w: c for w, c in config.items() if w != workspace}
        if changed:
            new[workspace] = changed
        return self._commit(version + 1, new)

    def replace_all(self, config: Config) -> int:
        """Replace everything (used to seed); return the new version."""
        fresh = {w: {t: dict(kv) for t, kv in types.items()} for w, types in config.items()}
        return self._commit(self.version + 1, fresh)

    def _commit(self, version: int, config: Config) -> int:
        text = json.dumps({"version": version, "config": config}, sort_keys=True, indent=1)
        try:
            _write_atomically(self.path, text)
        except OSError as exc:
            raise TransientError(f"cannot write config store {self.path}: {exc}") from exc
        self._state = (version, config)
        return version


def _write_atomically(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    # Make the rename itself durable (not possible on every platform).
    with contextlib.suppress(OSError):
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
