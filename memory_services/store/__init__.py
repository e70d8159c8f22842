"""Vector stores: one Protocol, two real Qdrant backends (embedded edge, and server)."""
