"""A processor that marks a file when a message arrives, then works for a long time.

Run in a subprocess by the kill test: the marker says "received, not yet acknowledged".
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from react_mem.processor.context import MessageContext
from react_mem.schema.ping import PingRequest
from tests.support.recording import RecordingProcessor


class SlowProcessor(RecordingProcessor):
    async def on_input(self, request: PingRequest, ctx: MessageContext) -> None:
        Path(os.environ["SLOW_MARKER"]).write_text(request.message)  # noqa: ASYNC240
        await asyncio.sleep(600)
