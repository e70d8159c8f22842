"""A file-backed config service, wire-compatible with TrustGraph's."""

from react_mem.config_service.store import ConfigStore

__all__ = ["ConfigStore"]
