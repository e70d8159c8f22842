"""Consolidation: merging near-duplicate, low-importance memories into one, undoably.

Shared by fact- and episode-memory (seed 002 §5.4, §6.1). A pass over one scope
(:mod:`.engine`) counts the memories at or above the importance threshold (they are
``preserved``: never read for merging, never written), clusters the others by cosine
similarity (:mod:`.cluster`), and merges each cluster into its best member; the absorbed
members stay in the store as history, marked with the survivor and the pass. The pass's plan
(every field it changed, with the value before) is kept in a ledger (:mod:`.ledger`) under
its consolidation id, so a redelivered request does not merge twice and ``unconsolidate``
puts every record back. The kind-specific rules (what "best" means, how fields merge) are a
:class:`~.engine.Kind` each service supplies.
"""
