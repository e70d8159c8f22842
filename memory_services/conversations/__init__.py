"""conversation-memory: ordered turns, a rolling summary, and conversation-ended events."""
