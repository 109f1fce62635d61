"""Which states need not be written: only_rescheduled, against what the core decides."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.poll import Decision, Emit, Page, begin, decide, fresh_state, plan
from watukuy.core.poller import FetchResult, Poller, define_poller
from watukuy.core.schedule import KeySchedule, resumed
from watukuy.core.state import Lane, LaneState, PartitionState, Validators, only_rescheduled

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0


def make(schedule: dict[str, str]) -> Poller:
    return define_poller(
        name="invoices",
        fetch=lambda ctx: None,
        identity=lambda i: i["id"],
        version=lambda i: i["v"],
        cursor={"strategy": "token", "initial": None},
        schedule=schedule,
    )


FIXED = make({"min": "30s", "max": "30s"})


def emit(decision: Decision) -> Emit:
    assert isinstance(decision, Emit), decision
    return decision


def poll(poller: Poller, state: PartitionState, outcome: Page, *, late: float = 0.2) -> Emit:
    """One live poll started ``late`` after its due time, answered 0.3 s after that."""
    started = state.schedule.next_due + late
    step = plan(poller, state, Lane.LIVE, started)
    return emit(decide(poller, begin(state, started), {}, step, outcome, started + 0.3))


NOT_MODIFIED = Page(result=FetchResult(items=[], cursor=None), not_modified=True)


def written_state() -> PartitionState:
    state = fresh_state(FIXED, "t_1", NOW)
    return replace(
        state,
        schedule=KeySchedule(interval=30.0, next_due=NOW),
        validators=(("u", Validators(etag='"e1"')),),
        last_success=NOW - 30,
    )


def test_idle_polls_on_a_fixed_schedule_leave_the_written_state_good() -> None:
    written = state = written_state()
    for _ in range(100):
        state = poll(FIXED, state, NOT_MODIFIED).state
        assert only_rescheduled(written, state)
    # ... and a restore finds the due time the owner held, from what it said it made.
    assert resumed(written.schedule, state.schedule.next_due - 1).next_due == pytest.approx(
        state.schedule.next_due
    )


def test_a_poll_that_changed_anything_else_must_be_written() -> None:
    written = written_state()
    found = Page(result=FetchResult(items=[{"id": "a", "v": "1"}], cursor="c1", has_more=False))
    assert not only_rescheduled(written, poll(FIXED, written, found).state)
    same_items_new_cursor = Page(result=FetchResult(items=[], cursor="c9", has_more=False))
    assert not only_rescheduled(written, poll(FIXED, written, same_items_new_cursor).state)
    new_etag = Page(
        result=FetchResult(items=[], cursor=None, has_more=False),
        validators={"u": Validators(etag='"e2"')},
    )
    assert not only_rescheduled(written, poll(FIXED, written, new_etag).state)
    # Late: it moves to its key's point of the interval, off the grid a restore follows.
    assert not only_rescheduled(written, poll(FIXED, written, NOT_MODIFIED, late=5.0).state)
    # An idle key backing off (min < max): its interval grows.
    backing_off = make({"min": "30s", "max": "15m"})
    assert not only_rescheduled(written, poll(backing_off, written, NOT_MODIFIED).state)


def test_due_times_off_the_grid_or_not_later_must_be_written() -> None:
    written = written_state()
    due = written.schedule.next_due

    def due_at(at: float, **changes: Any) -> PartitionState:
        return replace(written, schedule=replace(written.schedule, next_due=at, **changes))

    assert only_rescheduled(written, due_at(due + 30)) and only_rescheduled(
        written, due_at(due + 90)
    )
    assert not only_rescheduled(written, written)  # not moved on: nothing was polled
    assert not only_rescheduled(written, due_at(due + 45))
    assert not only_rescheduled(written, due_at(due - 30))
    assert not only_rescheduled(written, due_at(due + 30, interval=60.0))
    assert not only_rescheduled(written, due_at(due + 30, throttle_until=due + 20))


CHANGED: dict[str, Any] = {
    "poller": "other",
    "partition": "t_2",
    "live": LaneState(cursor="c1"),
    "backfill": LaneState(active=True),
    "reconcile": LaneState(scan=3),
    "reconcile_due": NOW + 5,
    "circuit": Circuit(state=CircuitState.OPEN, consecutive_failures=5, opened_at=NOW),
    "sequence": 7,
    "validators": (("u", Validators(etag='"e9"')),),
    "paused": "user",
    "paused_at": NOW,
    "epoch": 3,
    "last_error": "HTTP 500",
    "created": NOW - 1,
}


@pytest.mark.parametrize(
    "name", [f.name for f in fields(PartitionState) if f.name not in ("schedule", "last_success")]
)
def test_every_other_field_counts(name: str) -> None:
    """A field added to the state is compared too (this fails until it has a changed value)."""
    written = written_state()
    moved = replace(written.schedule, next_due=written.schedule.next_due + 30)
    new = replace(written, schedule=moved, last_success=NOW, **{name: CHANGED[name]})
    assert getattr(new, name) != getattr(written, name)
    assert not only_rescheduled(written, new)
