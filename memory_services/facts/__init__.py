"""Fact memory: long-term facts per scope, deduplicated, reinforced, superseded, expiring."""
