"""The PII screen every memory service applies to what it is asked to store.

A service calls ``request = await guard.screen(workspace, kind_of_service, request)`` before
executing it: under the workspace's policy (:mod:`.policy`) the stored text comes back
redacted, the request is refused (:class:`PiiRefused`, error type ``pii-refused``), or it
passes as is. Detection runs on one worker thread shared by the process (Presidio and spaCy
are not made for concurrent calls; the event loop stays free meanwhile), and the detector is
built there once, at the first service's :meth:`PiiGuard.start`. A request's texts go to
that thread a few at a time (:data:`CHUNK_CHARS`), so another request's screen, queued
meanwhile, waits for one part of a maximum batch (tens of milliseconds), not for all of it
(256 facts of 4,000 characters: seconds). Findings are counted in
``tg_memory_pii_detections_total{processor, kind, entity}``; their text is never logged.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry, Counter

from memory_services.pii.fields import screened, stores
from memory_services.pii.policy import PiiPolicy
from react_mem.errors import BadRequest, ReactMemError
from react_mem.metrics import per_registry
from react_mem.processor.config_source import WorkspaceConfig
from react_mem.schema import WireModel
from react_mem.text import fold

if TYPE_CHECKING:
    from memory_services.pii.engine import Detector

logger = logging.getLogger(__name__)

#: The config type and key a workspace sets its policy with.
CONFIG_TYPE = "agent-mem"
CONFIG_KEY = "pii-policy"

R = TypeVar("R", bound=WireModel)

#: spaCy's own limit, above every service's limit on one stored text (≈2 s to screen).
MAX_SCREEN_CHARS = 1_000_000
#: Characters (or :data:`CHUNK_TEXTS` texts) sent to the PII thread as one job: ≈20-40 ms of
#: screening (≈2.3 µs a character plus ≈0.7 ms a text, measured on facts and lessons).
CHUNK_CHARS = 8_000
CHUNK_TEXTS = 16


class PiiRefused(BadRequest):
    """The workspace's policy is ``drop`` and the record holds PII or a secret."""

    def __init__(self, kind: str, entities: list[str]) -> None:
        super().__init__(
            f"{kind} refused: it holds {', '.join(entities)} and this workspace's "
            "pii-policy is drop",
            type="pii-refused",
        )


def _detections(registry: CollectorRegistry) -> Counter:
    return Counter(
        "tg_memory_pii_detections_total",
        "PII and secrets found in text a memory service was asked to store, by entity type",
        ["processor", "kind", "entity"],
        registry=registry,
    )


#: ``tg_memory_pii_detections_total{processor, kind, entity}``.
pii_detections = per_registry(_detections)

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pii")
_detector: Detector | None = None
_detector_lock = threading.Lock()


def _shared_detector() -> Detector:
    """The process's detector (built on first use, on the PII thread)."""
    global _detector
    with _detector_lock:
        if _detector is None:
            from memory_services.pii.engine import Detector

            _detector = Detector()
        return _detector


class PiiGuard:
    def __init__(
        self, processor: str, default: PiiPolicy, registry: CollectorRegistry | None = None
    ) -> None:
        self._processor = processor
        self._default = default
        self._workspaces: dict[str, PiiPolicy] = {}
        self._detections = pii_detections(registry)

    async def start(self) -> None:
        """Build the detector (≈2 s the first time in a process) unless nothing screens."""
        if self._default.action != "allow" or self._workspaces:
            await asyncio.get_running_loop().run_in_executor(_executor, _shared_detector)

    def policy(self, workspace: str) -> PiiPolicy:
        return self._workspaces.get(workspace, self._default)

    async def on_config(self, workspace: str, config: WorkspaceConfig, version: int) -> None:
        """Apply the workspace's ``agent-mem`` ``pii-policy`` (absent: the default). A bad
        value is logged and the previous policy kept, as the agent keeps its config."""
        value = config.get(CONFIG_TYPE, {}).get(CONFIG_KEY)
        if value is None:
            self._workspaces.pop(workspace, None)
            return
        try:
            self._workspaces[workspace] = self._default.overridden(value)
        except ReactMemError as exc:
            logger.error("%s: %s: %s; keeping the previous policy", self._processor, workspace, exc)

    async def screen(self, workspace: str, request: R) -> R:
        """``request`` as the workspace's policy lets it be stored; raises
        :class:`PiiRefused` under ``drop`` when it holds PII."""
        policy = self.policy(workspace)
        if policy.action == "allow" or not stores(request):
            return request
        texts: list[tuple[str, str]] = []  # (kind, text), in the order screened() reads them

        def collect(kind: str, text: str) -> str:
            texts.append((kind, text))
            return text

        screened(request, collect)
        loop = asyncio.get_running_loop()
        cleaned: list[str] = []
        for chunk in _chunks(texts):
            work = functools.partial(self._clean_all, policy, chunk)
            cleaned += await loop.run_in_executor(_executor, work)
        stored = iter(cleaned)
        return screened(request, lambda kind, text: next(stored))

    def _clean_all(self, policy: PiiPolicy, chunk: list[tuple[str, str]]) -> list[str]:
        """Runs on the PII thread."""
        return [self._clean(policy, kind, text) for kind, text in chunk]

    def _clean(self, policy: PiiPolicy, kind: str, text: str) -> str:
        """Runs on the PII thread."""
        if not text.strip():
            return text
        if len(text) > MAX_SCREEN_CHARS:
            raise BadRequest(
                f"{kind}: a text of {len(text)} characters is over {MAX_SCREEN_CHARS}",
                type="too-large",
            )
        detector = _shared_detector()
        # Read as the prompt renders it: a value in full-width digits or split by a
        # zero-width space is found, and what is stored is the folded text, redacted.
        folded = fold(text)
        findings = detector.find(folded, policy.entities, policy.threshold)
        if not findings:
            return text
        redacted, entities = detector.redact(folded, findings)
        for entity in entities:
            self._detections.labels(self._processor, kind, entity).inc()
        if policy.action == "drop":
            raise PiiRefused(kind, sorted(set(entities)))
        return redacted


def _chunks(texts: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """``texts`` in order, in jobs of about :data:`CHUNK_CHARS` characters (a longer text
    alone) and at most :data:`CHUNK_TEXTS` texts."""
    chunks: list[list[tuple[str, str]]] = []
    size = 0
    for item in texts:
        if not chunks or size + len(item[1]) > CHUNK_CHARS or len(chunks[-1]) >= CHUNK_TEXTS:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += len(item[1])
    return chunks
