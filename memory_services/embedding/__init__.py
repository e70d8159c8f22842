"""Embedders: one Protocol; sentence-transformers loaded offline by default."""
