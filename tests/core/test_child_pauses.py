"""A child key's pauses as pure functions: which keys have expired (paused by their parent item
or their tenant's removal for at least the child poller's ``retain``; never one a user paused,
never a key of a root poller), and what a child paused by its parent (or resumed) sends on to
its own children."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from watukuy.core.children import cascade, expired
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.state import PartitionState, SnapshotEntry

pytestmark = pytest.mark.unit

DAY = 86400.0


async def fetch(ctx: Any) -> dict[str, Any]:
    return {"items": [], "cursor": None}


CHILD = define_poller(
    name="t.issues",
    parent={"poller": "t.projects", "key": "id"},
    identity=lambda item: item["id"],
    fetch=fetch,
    retain="2d",
)
GRANDCHILD = define_poller(
    name="t.comments",
    parent={"poller": "t.issues", "key": "id"},
    identity=lambda i: i["id"],
    fetch=fetch,
)
ROOT = define_poller(
    name="t.projects", partitions=lambda: [], identity=lambda i: i["id"], fetch=fetch, retain="2d"
)


def state(key: str, paused: Any, since: float | None) -> PartitionState:
    return replace(fresh_state(CHILD, key, 0.0), paused=paused, paused_at=since)


def test_paused_by_parent_or_removal_for_retain_expires_and_nothing_else() -> None:
    now = 10 * DAY
    states = [
        state("acme/P1", "parent", now - 2 * DAY),  # exactly retain: gone
        state("acme/P2", "removed", now - 3 * DAY),
        state("acme/P3", "parent", now - 2 * DAY + 1),  # a second short
        state("acme/P4", "user", now - 9 * DAY),  # a user's pause is the user's
        state("acme/P5", None, None),
        state("acme/P6", "parent", None),  # paused before the time was kept: never guessed
    ]
    assert expired(CHILD, states, now) == ["acme/P1", "acme/P2"]
    assert expired(ROOT, states, now) == []


SNAPSHOT = {
    "I7": SnapshotEntry("v1", 0.0),
    "I8": SnapshotEntry("v1", 0.0, deleted=5.0),  # its own child was paused when it went
    "a/b": SnapshotEntry("v1", 0.0),  # could not be a child key's last part
}
POLLERS = {p.name: p for p in (ROOT, CHILD, GRANDCHILD)}


@pytest.mark.parametrize(
    ("before", "after", "sent"),
    [
        (None, "parent", "pause_child"),
        ("parent", None, "resume_child"),
        (None, "user", None),  # a user's pause is the user's: the children go on
        ("user", None, None),
        ("parent", "parent", None),
        ("removed", None, None),  # the tenant came back: its children are listed again
    ],
)
def test_a_pause_by_the_parent_and_its_end_go_down_to_live_items_children(
    before: Any, after: Any, sent: str | None
) -> None:
    was, now = state("acme/P1", before, 1.0), state("acme/P1", after, 2.0)
    commands = cascade(POLLERS, CHILD, was, now, SNAPSHOT, 9.0)
    expected = [] if sent is None else [(sent, "t.comments", "acme/P1/I7")]
    assert [(c.op, c.poller, c.partition) for c in commands] == expected
    assert cascade(POLLERS, GRANDCHILD, was, now, SNAPSHOT, 9.0) == []  # no children of its own
