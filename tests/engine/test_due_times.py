"""When held keys are due: a hold keeps a key back until its time, once; a key let go is
forgotten with its hold."""

from __future__ import annotations

import pytest

from watukuy.engine.due_times import KeyTimes

pytestmark = pytest.mark.unit


def test_a_hold_delays_the_next_scheduling_only() -> None:
    times = KeyTimes()
    times.hold("invoices/t_1", until=50.0)
    times.schedule("invoices/t_1", 10.0)
    assert times.at("invoices/t_1") == 50.0  # not before the hold
    times.schedule("invoices/t_1", 20.0)
    assert times.at("invoices/t_1") == 20.0  # the hold was spent


def test_a_later_due_time_than_the_hold_wins() -> None:
    times = KeyTimes()
    times.hold("invoices/t_1", until=50.0)
    times.schedule("invoices/t_1", 90.0)
    assert times.at("invoices/t_1") == 90.0


def test_a_key_off_the_queue_spends_its_hold() -> None:
    times = KeyTimes()
    times.hold("invoices/t_1", until=50.0)
    times.schedule("invoices/t_1", None)  # paused: off the queue
    times.schedule("invoices/t_1", 10.0)
    assert times.at("invoices/t_1") == 10.0


def test_discard_forgets_the_key_and_its_hold() -> None:
    times = KeyTimes()
    times.schedule("invoices/t_1", 10.0)
    times.hold("invoices/t_2", until=50.0)
    times.discard("invoices/t_1")
    times.discard("invoices/t_2")
    assert times.next_at() is None
    times.schedule("invoices/t_2", 10.0)
    assert times.pop_due(10.0) == ["invoices/t_2"]
    assert times.pop_due(10.0) == []
