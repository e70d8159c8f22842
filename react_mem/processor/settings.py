"""Processor settings: CLI arguments over environment over a settings file over defaults."""

from __future__ import annotations

import contextvars
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Self

import platformdirs
from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from react_mem.bus.backends import BACKENDS, BackendSettings, unknown_backend
from react_mem.errors import ConfigurationError

_settings_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "settings_file", default=None
)


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


def default_state_dir() -> Path:
    return Path(platformdirs.user_state_dir("react-mem"))


class BusSettings(BaseSettings, BackendSettings):
    """How to reach the bus: ``pubsub_backend`` names the broker, whose own keys come from
    :class:`~react_mem.bus.backends.BackendSettings`."""

    model_config = SettingsConfigDict(env_prefix="REACT_MEM_", extra="forbid")

    pubsub_backend: str = Field(
        default="pulsar", validation_alias=AliasChoices("pubsub_backend", "PUBSUB_BACKEND")
    )
    state_dir: Path = Field(default_factory=default_state_dir)
    connect_timeout: float = Field(default=60.0, gt=0)
    metrics: bool = True
    metrics_port: int = Field(default=8000, ge=0, le=65535)
    log_level: LogLevel = LogLevel.INFO

    @field_validator("pubsub_backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        if name not in BACKENDS:
            raise ValueError(unknown_backend(name))
        return name

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = _settings_file.get()
        if path is None:
            return (init_settings, env_settings)
        return (init_settings, env_settings, YamlConfigSettingsSource(settings_cls, path))

    @classmethod
    def load(cls, values: dict[str, Any] | None = None, *, file: Path | None = None) -> Self:
        """Build and validate; a bad value raises :class:`ConfigurationError` naming the key."""
        if file is not None and not file.is_file():
            raise ConfigurationError(f"settings file {file} does not exist")
        token = _settings_file.set(file)
        try:
            return cls(**(values or {}))
        except ValidationError as exc:
            raise ConfigurationError(_describe(exc)) from exc
        finally:
            _settings_file.reset(token)


class ProcessorSettings(BusSettings):
    """Settings every processor has; a processor subclasses this to add its own."""

    #: Settings naming input files that a group file gives relative to itself.
    group_relative: ClassVar[tuple[str, ...]] = ("flows",)

    id: str
    concurrency: int = Field(default=1, ge=1, le=1000)
    #: A flow file (YAML ``{workspace: {config-type: {key: value}}}``); without one, flows
    #: come from the config service on ``request:tg:config`` and ``notify:tg:config``.
    flows: Path | None = None
    config_timeout: float = Field(default=60.0, gt=0)
    max_redeliveries: int = Field(default=5, ge=0)
    retry_delay: float = Field(default=0.5, ge=0)


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<settings>"
        given = f" (got {err['input']!r})" if err["type"] != "missing" else ""
        lines.append(f"setting {key!r}: {err['msg']}{given}")
    return "invalid settings: " + "; ".join(lines)
