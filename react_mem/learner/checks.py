"""What the learner refuses before it learns anything: a trajectory or a feedback message
without its ids, with ids too long, or with numbers no real record has."""

from __future__ import annotations

import math

from react_mem.errors import BadRequest
from react_mem.schema.playbook import Feedback
from react_mem.schema.trajectory import Trajectory

#: The longest id (record, collection, user, conversation) a record may carry.
MAX_ID_CHARS = 256


def checked_trajectory(t: Trajectory) -> str:
    """The record's id, once ``t`` is fit to learn from."""
    record_id = t.trajectory_id or t.session_id
    if not record_id:
        raise BadRequest("trajectory: trajectory_id or session_id is required")
    if not t.question.strip():
        raise BadRequest("trajectory: the question is empty")
    ids = (record_id, t.collection, t.user or "", t.conversation_id, t.context_scope_id)
    if any(len(i) > MAX_ID_CHARS for i in ids):
        raise BadRequest("trajectory: an id is too long", type="too-large")
    numbers = (t.duration_seconds, t.started_at, t.finished_at)
    if not all(math.isfinite(n) for n in numbers) or min(t.in_tokens, t.out_tokens) < 0:
        raise BadRequest("trajectory: tokens and times must be finite and not negative")
    return record_id


def check_feedback(feedback: Feedback) -> None:
    if not feedback.session_id.strip():
        raise BadRequest("feedback: session_id is required")
    ids = (feedback.feedback_id, feedback.session_id, feedback.collection, feedback.user or "")
    if any(len(i) > MAX_ID_CHARS for i in ids):
        raise BadRequest("feedback: an id is too long", type="too-large")
    if len(feedback.rubric) > 100 or len(feedback.comment) > 10_000:
        raise BadRequest(
            "feedback: too many rubric results or too long a comment", type="too-large"
        )
