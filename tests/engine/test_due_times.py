"""KeyTimes.served_until: the time before which every poll due was made, as a store is told."""

from __future__ import annotations

import pytest

from watukuy.core.schedule import ON_GRID
from watukuy.engine.due_times import KeyTimes

pytestmark = pytest.mark.unit

NOW = 1_000.0


def test_it_is_the_earliest_due_time_not_yet_polled() -> None:
    due = KeyTimes()
    due.schedule("a", NOW + 30)
    due.schedule("b", NOW + 10)
    assert due.served_until([], NOW) == NOW + 2 * ON_GRID  # nothing due yet: up to now
    assert due.served_until([NOW - 3.0], NOW) == NOW - 3.0  # a poll under way since then
    assert due.served_until([], NOW + 20) == NOW + 10  # b is late: its poll is not made
    assert due.pop_due(NOW + 20) == ["b"]
    assert due.served_until([], NOW + 20) == NOW + 20 + 2 * ON_GRID  # taken: polling says it


def test_a_key_held_back_counts_from_when_it_was_due() -> None:
    """A key whose commit was refused is held back past its due time: that poll is not made."""
    due = KeyTimes()
    due.hold("a", NOW + 5)
    due.schedule("a", NOW)  # due now, held until NOW + 5
    assert due.at("a") == NOW + 5
    assert due.served_until([], NOW + 1) == NOW
    due.schedule("a", NOW + 30)  # polled and rescheduled: the hold is spent
    assert due.served_until([], NOW + 6) == NOW + 6 + 2 * ON_GRID


def test_a_key_off_the_queue_has_no_poll_due() -> None:
    due = KeyTimes()
    due.schedule("a", NOW - 100)
    due.schedule("a", None)  # paused
    due.schedule("b", NOW + 10)
    due.discard("b")  # let go
    assert due.served_until([], NOW) == NOW + 2 * ON_GRID
