"""The inspector's pieces without a bus: the token gate's sessions and CSRF tokens, and the
playbook diff between two versions."""

from __future__ import annotations

import pytest

from react_mem.inspector.auth import SESSION_SECONDS, Gate
from react_mem.inspector.views.playbook import diff
from react_mem.schema.playbook import Bullet


def test_a_short_token_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="16 characters"):
        Gate("short")


def test_sessions_expire_and_each_has_its_own_csrf_token() -> None:
    gate = Gate("a-token-long-enough-for-this")
    assert gate.token_ok("a-token-long-enough-for-this")
    assert not gate.token_ok("a-token-long-enough-for-thiS") and not gate.token_ok(None)
    assert gate.bearer_ok("Bearer a-token-long-enough-for-this")
    assert not gate.bearer_ok("Basic a-token-long-enough-for-this")
    one, first = gate.login(now=1000.0)
    two, second = gate.login(now=1000.0)
    assert one != two and first.csrf != second.csrf
    assert gate.session(one, now=1000.0 + SESSION_SECONDS - 1) is first
    assert gate.session(one, now=1000.0 + SESSION_SECONDS) is None  # expired
    assert Gate.csrf_ok(first, first.csrf) and not Gate.csrf_ok(first, second.csrf)
    assert not Gate.csrf_ok(first, None)
    gate.logout(two)
    assert gate.session(two, now=1000.0) is None
    gate.login(now=1000.0 + SESSION_SECONDS + 5)  # a login drops the expired sessions
    assert one not in gate.sessions


def test_the_diff_of_two_versions_names_what_was_added_removed_and_changed() -> None:
    kept = Bullet(id="a", content="Confirm dates.")
    old = [kept, Bullet(id="b", content="Ask twice."), Bullet(id="c", content="Be brief.")]
    new = [
        kept,
        Bullet(id="c", content="Be brief.", helpful=2),
        Bullet(id="d", content="Prefer trains."),
    ]
    changes = diff(old, new)
    assert [b.id for b in changes.added] == ["d"]
    assert [b.id for b in changes.removed] == ["b"]
    assert [(o.helpful, n.helpful) for o, n in changes.changed] == [(0, 2)]
    assert diff(new, new) == type(changes)([], [], [])
