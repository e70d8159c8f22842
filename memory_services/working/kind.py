"""working-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``).

The agent calls it to compress its steps; it holds nothing past an invocation, so it has
neither a recall source nor a forget client."""

from react_mem.processor.kinds import SMALL, Deploy, MemoryKind

KIND = MemoryKind(
    name="working-memory",
    processor="memory_services.working.service:WorkingMemoryProcessor",
    position=50,
    deploy=Deploy(concurrency=2, qdrant=False, resources=SMALL),
    agent_client=True,
    audit=False,
    calls=("text-completion",),
    interface=False,
)
