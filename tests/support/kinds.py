"""The installed memory kinds, read once for the tests as the runtime reads them at start-up,
and what the agent makes of them: its sources and the memory section's layout."""

from __future__ import annotations

from react_mem.agent.prompt import Layout
from react_mem.agent.sources import Sources
from react_mem.processor.kinds import MemoryKinds

INSTALLED = MemoryKinds.from_entry_points()
SOURCES = Sources.of(INSTALLED)
LAYOUT = Layout.of(SOURCES)
