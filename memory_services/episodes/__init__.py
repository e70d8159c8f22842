"""episode-memory: past problem-solving episodes, retrieved by similarity of goal and context."""
