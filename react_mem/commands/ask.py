"""``react-mem ask``: send one question to the agent and print its response stream."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from dataclasses import dataclass
from typing import TextIO

from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Transport
from react_mem.commands.common import (
    NO_STACK_HINT,
    BusArgs,
    ServiceQueues,
    Subparsers,
    bus_settings,
    flow_args,
    with_bus,
)
from react_mem.commands.progress import StatusLine
from react_mem.commands.sessions import SessionLog
from react_mem.commands.transcript import Transcript
from react_mem.errors import RequestTimeout
from react_mem.schema import AgentRequest, AgentResponse


@dataclass(frozen=True, kw_only=True)
class AskOptions:
    question: str
    #: Continue this conversation; None starts a new one (its id is printed).
    conversation: str | None = None
    user: str | None = None
    collection: str = "default"
    workspace: str = "default"
    flow: str = "default"
    streaming: bool = True
    #: Seconds to wait for each message of the response stream.
    timeout: float = 120.0
    json: bool = False
    verbose: bool = False
    #: The request's session id (the one feedback names); None: a fresh one.
    session: str | None = None


def add_parser(sub: Subparsers, bus: BusArgs) -> None:
    parser = sub.add_parser("ask", help="ask the agent a question and stream its reasoning")
    parser.add_argument("question")
    parser.add_argument(
        "-c", "--conversation", help="continue this conversation (default: start a new one)"
    )
    parser.add_argument("-u", "--user", help="the user the memories belong to")
    parser.add_argument("--collection", default="default")
    flow_args(parser)
    parser.add_argument(
        "--no-stream", dest="streaming", action="store_false", help="whole messages, no chunks"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for each message (120)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    parser.add_argument("-v", "--verbose", action="store_true", help="show explain messages")
    bus(parser)
    parser.set_defaults(log_level="WARNING")


async def command(args: argparse.Namespace) -> int:
    session = str(uuid.uuid4())
    options = AskOptions(
        session=session,
        question=args.question,
        conversation=args.conversation,
        user=args.user,
        collection=args.collection,
        workspace=args.workspace,
        flow=args.flow,
        streaming=args.streaming,
        timeout=args.timeout,
        json=args.json,
        verbose=args.verbose,
    )
    settings = bus_settings(args)
    code = await with_bus(settings, lambda transport: ask(transport, options))
    if code == 0:  # an answered session: `feedback --last` rates it
        SessionLog(settings.state_dir).record(session)
    return code


async def ask(
    transport: Transport,
    options: AskOptions,
    *,
    queues: ServiceQueues | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    progress_interval: float = 0.5,
) -> int:
    """Publish an AgentRequest and print the responses; 0 on an answer, 1 on an error."""
    queues = queues or ServiceQueues.of("agent", options.workspace, options.flow)
    conversation = options.conversation or str(uuid.uuid4())
    request = AgentRequest(
        question=options.question,
        collection=options.collection,
        streaming=options.streaming,
        session_id=options.session or str(uuid.uuid4()),
        conversation_id=conversation,
        user=options.user,
    )
    if options.conversation is None and not options.json:
        print(
            f"conversation {conversation} (continue it with --conversation {conversation})",
            file=err,
        )
    transcript = Transcript(None if options.json else out, verbose=options.verbose)
    client: RequestResponseClient[AgentRequest, AgentResponse] = RequestResponseClient(
        transport,
        queues.request,
        queues.response,
        AgentResponse,
        subscriber="react-mem-ask",
        timeout=options.timeout,
    )
    progress = StatusLine(err, "waiting for the agent", interval=progress_interval)
    await client.start()
    try:
        progress.start()
        async for response in client.stream(request, last=_last):
            await progress.stop()
            transcript.feed(response)
    except RequestTimeout:
        transcript.finish()
        await progress.stop()
        if transcript.received == 0:
            problem = f"no response from the agent on {queues.request}"
            hint = NO_STACK_HINT
        else:
            problem, hint = "the agent stopped responding", "raise --timeout for a slow model"
        print(f"react-mem ask: {problem} within {options.timeout:g}s ({hint})", file=err)
        return 1
    finally:
        await progress.stop()
        await client.close()
    transcript.finish()
    if options.json:
        ids = {"conversation_id": conversation, "session_id": request.session_id}
        print(json.dumps(ids | transcript.to_json()), file=out)
    if transcript.error is not None:
        error = transcript.error
        # The agent's errors are agent-manager's type agent-error, their kind in the message.
        kind = "" if error.type == "agent-error" else f" ({error.type})"
        print(f"react-mem ask: agent error{kind}: {error.message}", file=err)
        return 1
    if not options.json:  # on stderr: stdout stays the answer alone
        print(
            f"session {request.session_id} (rate it with: react-mem feedback --last "
            "--helpful, or --harmful)",
            file=err,
        )
    return 0


def _last(response: AgentResponse) -> bool:
    # A processor's error reply for a failed request carries no end_of_dialog.
    return response.end_of_dialog or response.error is not None or response.message_type == "error"
