"""playbook-memory's one registration (``react_mem.memory_kinds`` in ``pyproject.toml``)."""

from react_mem.processor.kinds import Deploy, MemoryKind

KIND = MemoryKind(
    name="playbook-memory",
    processor="memory_services.playbook.service:PlaybookMemoryProcessor",
    position=40,
    deploy=Deploy(
        params="seed_bullets: ../playbook/seed.yaml, reinforcement_gain: 0.25",
        note=(
            "reinforcement_gain: helpful marks raise a bullet's strength (react-mem's addition; with",  # noqa: E501
            "the seeds' fixed strength, pruning by decay is pruning by recency: benchmarks/playbook.py).",  # noqa: E501
        ),
    ),
    source="react_mem.agent.sources:PLAYBOOK",
    client="react_mem.clients.playbook:PlaybookClient",
)
