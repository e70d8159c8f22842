"""Queue ids, and their Pulsar topics exactly as TrustGraph maps them."""

from __future__ import annotations

import pytest

from react_mem.bus.pulsar import pulsar_topic
from react_mem.bus.queues import Queue, QueueClass, dead_letter_queue, queue_id
from react_mem.errors import ConfigurationError


@pytest.mark.parametrize(
    ("queue", "topic", "exclusive"),
    [
        ("flow:tg:text-completion-request", "persistent://tg/flow/text-completion-request", False),
        ("request:tg:config", "non-persistent://tg/request/config", False),
        ("response:tg:config", "non-persistent://tg/response/config", True),
        ("notify:tg:config", "non-persistent://tg/notify/config", True),
        ("request:tg:agent:ws1:default", "non-persistent://tg/request/agent:ws1:default", False),
        ("flow:custom:x", "persistent://custom/flow/x", False),
    ],
)
def test_queue_ids_map_to_trustgraph_topics(queue: str, topic: str, exclusive: bool) -> None:
    parsed = Queue.parse(queue)
    assert pulsar_topic(parsed) == topic
    assert parsed.exclusive is exclusive
    assert parsed.id == queue


def test_queue_id_builder_matches_trustgraph() -> None:
    assert queue_id("config", QueueClass.REQUEST) == "request:tg:config"
    assert queue_id("text-completion-request") == "flow:tg:text-completion-request"


@pytest.mark.parametrize("bad", ["config", "flow:tg", "queue:tg:x", "flow::x", ""])
def test_invalid_queue_ids_are_refused_with_the_id_named(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="queue"):
        Queue.parse(bad)


def test_dead_letters_are_persistent_and_per_subscription() -> None:
    dlq = dead_letter_queue(Queue.parse("request:tg:agent:ws:f"), "agent--ws--f--request")
    assert dlq.persistent
    assert pulsar_topic(dlq) == "persistent://tg/flow/dlq--request--agent--ws--f--request"
