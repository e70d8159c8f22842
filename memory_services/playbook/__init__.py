"""The ACE playbook: decay-scored strategy bullets evolved by delta operations.

``schema`` (wire messages), ``service`` (the processor and its settings), ``memory`` (the
operations: locking, loading, committing), ``scoring`` (decay and retrieval arithmetic),
``retrieve`` (ranking), ``deltas`` (ADD / UPDATE / TAG / REMOVE), ``bullets`` (what they do
to one bullet), ``refine`` (grow-and-refine), ``versions`` (history, snapshots, recovery),
``store`` (bullet records), ``records`` (identity and layout), ``playbook`` (one scope in
memory), ``seeds`` (seed bullets), ``metrics``.
"""
