"""``react-mem feedback SESSION_ID|--last --helpful|--harmful|--rating X``: tell the memory learner
how an answer went. The feedback goes on the flow's persistent feedback queue; the learner
re-runs reflection for that session's trajectory and moves its bullets' counters."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import TextIO

from pydantic import ValidationError

from react_mem.bus.queues import Queue
from react_mem.bus.transport import Transport
from react_mem.commands.common import BusArgs, Subparsers, bus_settings, flow_args, with_bus
from react_mem.commands.sessions import SessionLog
from react_mem.schema.playbook import Feedback, RubricResult

VERDICTS = {"pass": True, "fail": False}


def feedback_queue(workspace: str, flow: str) -> str:
    return f"flow:tg:agent-feedback:{workspace}:{flow}"


def _rubric(value: str) -> RubricResult:
    """``name=pass`` or ``name=fail``."""
    name, _, verdict = value.rpartition("=")
    if not name or verdict.lower() not in VERDICTS:
        raise argparse.ArgumentTypeError(f"expected NAME=pass or NAME=fail, not {value!r}")
    return RubricResult(name=name, passed=VERDICTS[verdict.lower()])


def add_parser(sub: Subparsers, bus: BusArgs) -> None:
    parser = sub.add_parser(
        "feedback",
        help="rate an agent answer (its session id) so the playbook learns from it",
        description="Tell the memory learner how an answer went: it re-runs reflection for "
        "that session's trajectory and moves the counters of the bullets in its prompt.",
    )
    parser.add_argument(
        "session_id",
        metavar="SESSION_ID",
        nargs="?",
        help="the answer's session id (`react-mem ask` prints it)",
    )
    parser.add_argument(
        "--last", action="store_true", help="the session `react-mem ask` answered last"
    )
    parser.add_argument(
        "--any-session",
        action="store_true",
        help="send even for a session `react-mem ask` did not answer on this state directory",
    )
    verdict = parser.add_mutually_exclusive_group(required=True)
    verdict.add_argument(
        "--helpful", dest="helpful", action="store_const", const=True, help="the answer helped"
    )
    verdict.add_argument(
        "--harmful", dest="helpful", action="store_const", const=False, help="it did not"
    )
    verdict.add_argument("--rating", type=float, help="-1 (harmful) .. 1 (helpful)")
    parser.add_argument(
        "--rubric",
        type=_rubric,
        action="append",
        default=[],
        metavar="NAME=pass|fail",
        help="a rubric's result (repeatable)",
    )
    parser.add_argument("--ground-truth", help="the right answer")
    parser.add_argument("--comment", default="", help="free text for the reflector")
    parser.add_argument("--collection", default="default", help="collection (default: default)")
    parser.add_argument("-u", "--user", help="the user the session belongs to")
    flow_args(parser)
    parser.add_argument("--json", action="store_true", help="print the message sent as JSON")
    bus(parser)
    parser.set_defaults(log_level="WARNING")


def build(args: argparse.Namespace) -> Feedback:
    return Feedback(
        feedback_id=str(uuid.uuid4()),
        session_id=args.session_id,
        collection=args.collection,
        user=args.user,
        rating=args.rating,
        helpful=args.helpful,
        rubric=args.rubric,
        ground_truth=args.ground_truth,
        comment=args.comment,
    )


async def command(args: argparse.Namespace) -> int:
    settings = bus_settings(args)
    problem = resolve_session(args, SessionLog(settings.state_dir))
    if problem is not None:
        print(f"react-mem feedback: {problem}", file=sys.stderr)
        return 2
    return await with_bus(settings, lambda transport: send(transport, args))


def resolve_session(args: argparse.Namespace, log: SessionLog) -> str | None:
    """Set ``args.session_id`` from ``--last``, and check it is a session ``ask`` answered:
    the learner's queue has no reply, so feedback on an unknown session would be dropped
    silently there. Returns the problem, or None."""
    if args.last == (args.session_id is not None):
        return "give a SESSION_ID or --last (not both)"
    if args.last:
        args.session_id = log.last()
        if args.session_id is None:
            return f"no session answered yet under {log.path.parent.parent} (run react-mem ask)"
        return None
    if not args.any_session and not log.known(args.session_id):
        return (
            f"unknown session {args.session_id!r}: `react-mem ask` answered no such session "
            f"under {log.path.parent.parent} (it prints each session's id; --last names the "
            "latest; --any-session sends it anyway, and the learner drops it if it has no "
            "trajectory of that session)"
        )
    return None


async def send(
    transport: Transport,
    args: argparse.Namespace,
    *,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Publish the feedback ``args`` describe: 0 sent, 2 bad arguments."""
    try:
        feedback = build(args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"react-mem feedback: invalid arguments: {problems}", file=err)
        return 2
    queue = feedback_queue(args.workspace, args.flow)
    producer = await transport.producer(Queue.parse(queue))
    try:
        await producer.send(feedback.encode(), {"id": feedback.feedback_id})
    finally:
        await producer.close()
    if args.json:
        print(json.dumps(feedback.to_wire(), indent=2), file=out)
    else:
        print(f"sent feedback {feedback.feedback_id} to {queue}: {describe(feedback)}", file=out)
    return 0


def describe(feedback: Feedback) -> str:
    """What was said, in one line."""
    if feedback.rating is not None:
        parts = [f"session {feedback.session_id} rated {feedback.rating:g}"]
    else:
        parts = [f"session {feedback.session_id} {'helpful' if feedback.helpful else 'harmful'}"]
    if feedback.rubric:
        results = ", ".join(f"{r.name} {'pass' if r.passed else 'fail'}" for r in feedback.rubric)
        parts.append(f"rubric: {results}")
    if feedback.ground_truth is not None:
        parts.append(f"ground truth: {feedback.ground_truth!r}")
    if feedback.comment:
        parts.append(f"comment: {feedback.comment!r}")
    return "; ".join(parts)
