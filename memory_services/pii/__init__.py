"""PII and secrets screening of what memory services store (issue: personal data in memory).

:mod:`.guard` is what a service calls; :mod:`.policy` the per-workspace choice (redact, drop,
allow); :mod:`.fields` which request fields are stored text; :mod:`.engine` Presidio, offline
and model-free; :mod:`.secrets` the credential recognizers; :mod:`.imports` keeps torch out.
"""
