"""Client subcommands of ``react-mem``: ``ask`` the agent, inspect and edit ``memory``.

Each command has an async entry point taking a :class:`~react_mem.bus.transport.Transport`,
so tests run it over any bus; the CLI wrappers only find the running stack's broker.
"""
