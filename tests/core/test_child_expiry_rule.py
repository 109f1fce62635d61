"""Which child keys have expired: paused by their parent item or their tenant's removal for at
least the child poller's ``retain``; never one a user paused, never a key of a root poller."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from watukuy.core.children import expired
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.state import PartitionState

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
