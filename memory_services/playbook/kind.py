"""playbook-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_services.playbook.source import PLAYBOOK
from react_mem.clients.playbook import PlaybookClient
from react_mem.processor.kinds import Deploy, MemoryKind

if TYPE_CHECKING:
    from react_mem.processor.base import Processor


def processor() -> type[Processor]:
    """The service's class, imported only by whoever starts it (its module loads the store)."""
    from memory_services.playbook.service import PlaybookMemoryProcessor

    return PlaybookMemoryProcessor


KIND = MemoryKind(
    name="playbook-memory",
    processor=processor,
    position=40,
    # No tuning here: the playbook's defaults live in its settings alone (docs/ace.md).
    deploy=Deploy(),
    source=PLAYBOOK,
    client=PlaybookClient,
)
