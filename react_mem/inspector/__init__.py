"""The web memory inspector (``react-mem inspect``): a client of the memory services like the
CLI, server-rendered (Starlette, Jinja2, htmx), behind a token. See ``docs/inspector.md``."""
