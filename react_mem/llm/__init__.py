"""LLM backends as text-completion processors (TrustGraph TextCompletion schema)."""
