"""How long a workspace keeps a kind of memory: a service default, overridden per workspace.

A service's setting gives the default (days, or none: kept until deleted); a workspace
overrides it with a key of its ``agent-mem`` config, read the same way as ``pii-policy``::

    conversation-retention-days: 30     # ended conversations: turns and summaries
    episode-retention-days: 365
    fact-ttl-days: forever              # "forever", "never", "none" or null: no limit

A bad value is logged and the previous setting kept, as the PII policy does.
"""

from __future__ import annotations

import logging
import math

from react_mem.errors import ConfigurationError
from react_mem.processor.config_source import WorkspaceConfig

logger = logging.getLogger(__name__)

#: The config type a workspace sets its retention with (beside ``pii-policy``).
CONFIG_TYPE = "agent-mem"
SECONDS_PER_DAY = 86400.0
FOREVER = frozenset({"forever", "never", "none", "null", ""})


def parse_days(key: str, value: object) -> float | None:
    """Days as seconds; None for "forever". The error names the key and the value."""
    if value is None or (isinstance(value, str) and value.strip().lower() in FOREVER):
        return None
    try:
        days = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        days = math.nan
    if isinstance(value, bool) or not math.isfinite(days) or days <= 0:
        raise ConfigurationError(f"{key} {value!r}: expected a positive number of days or forever")
    return days * SECONDS_PER_DAY


class WorkspaceRetention:
    """Seconds a workspace keeps one kind of memory (None: no limit)."""

    def __init__(self, processor: str, key: str, default_days: float | None) -> None:
        self.key = key
        self._processor = processor
        self._default = None if default_days is None else default_days * SECONDS_PER_DAY
        self._workspaces: dict[str, float | None] = {}

    def seconds(self, workspace: str) -> float | None:
        return self._workspaces.get(workspace, self._default)

    def overrides(self) -> dict[str, float | None]:
        """The workspaces that set their own period (a copy)."""
        return dict(self._workspaces)

    def cutoff(self, workspace: str, now: float) -> float:
        """Records of ``workspace`` older than this have expired (-inf: none)."""
        limit = self.seconds(workspace)
        return -math.inf if limit is None else now - limit

    async def on_config(self, workspace: str, config: WorkspaceConfig, version: int) -> None:
        """Apply the workspace's ``agent-mem`` value for :attr:`key` (absent: the default)."""
        settings = config.get(CONFIG_TYPE, {})
        if self.key not in settings:
            self._workspaces.pop(workspace, None)
            return
        try:
            self._workspaces[workspace] = parse_days(self.key, settings[self.key])
        except ConfigurationError as exc:
            logger.error(
                "%s: %s: %s; keeping the previous setting", self._processor, workspace, exc
            )
