"""playbook-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from react_mem.processor.kinds import Deploy, MemoryKind

KIND = MemoryKind(
    name="playbook-memory",
    processor="memory_services.playbook.service:PlaybookMemoryProcessor",
    position=40,
    # No tuning here: the playbook's defaults live in its settings alone (docs/ace.md).
    deploy=Deploy(),
    source="react_mem.agent.sources:PLAYBOOK",
    client="react_mem.clients.playbook:PlaybookClient",
)
