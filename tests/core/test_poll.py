from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.errors import StateCorrupted
from watukuy.core.events import event_id
from watukuy.core.poll import (
    Backoff,
    Decision,
    Emit,
    Failure,
    Page,
    PollPlan,
    Trip,
    begin,
    decide,
    due_at,
    fresh_state,
    next_lane,
    next_page,
    plan,
)
from watukuy.core.poller import FetchResult, Poller, define_poller
from watukuy.core.schedule import KeySchedule, phase_of
from watukuy.core.state import (
    Lane,
    LaneState,
    ParkedItem,
    PartitionState,
    SnapshotEntry,
    Validators,
)

pytestmark = pytest.mark.unit

NOW = 1_000_000.0
DAY = 86400.0


def make(**overrides: Any) -> Poller:
    fields: dict[str, Any] = {
        "name": "invoices",
        "fetch": lambda ctx: None,
        "identity": lambda i: i["id"],
        "version": lambda i: i["v"],
        "schedule": {"min": "30s", "max": "15m"},  # idle step: (900 - 30) / 10 = 87 s
    }
    fields.update(overrides)
    return define_poller(**fields)


POLLER = make()


def item(ident: str, version: str = "1", **extra: Any) -> dict[str, Any]:
    return {"id": ident, "v": version, **extra}


def page(items: list[Any], cursor: Any = None, has_more: bool | None = None, **kw: Any) -> Page:
    return Page(result=FetchResult(items=items, cursor=cursor, has_more=has_more), **kw)


def emit(decision: Decision) -> Emit:
    assert isinstance(decision, Emit), decision
    return decision


def with_interval(state: PartitionState, interval: float, next_due: float = NOW) -> PartitionState:
    return replace(state, schedule=KeySchedule(interval=interval, next_due=next_due))


def idle_state(poller: Poller = POLLER, **fields: Any) -> PartitionState:
    """A key polled before: live not due for another hour."""
    state = fresh_state(poller, "t_1", NOW - 10)
    return replace(state, schedule=KeySchedule(interval=900.0, next_due=NOW + 3600), **fields)


def apply(snapshot: dict[str, SnapshotEntry], result: Emit) -> dict[str, SnapshotEntry]:
    merged = {**snapshot, **result.upserts}
    for identity in result.forget:
        merged.pop(identity, None)
    return merged


# fresh state and lane choice


def test_fresh_state() -> None:
    poller = make(cursor={"strategy": "token", "initial": "start"})
    state = fresh_state(poller, "t_1", NOW)
    assert state.poller == "invoices"
    assert state.partition == "t_1"
    assert state.key == "invoices/t_1"
    assert state.live.cursor == "start"
    assert state.schedule.interval == 30.0
    assert state.schedule.next_due == NOW
    assert state.sequence == 0
    assert state.circuit.state is CircuitState.CLOSED
    assert state.paused is None
    assert state.reconcile_due is None
    assert state.created == NOW
    assert next_lane(state, NOW) is Lane.LIVE
    assert next_lane(state, NOW - 1) is None
    assert due_at(state, NOW - 5) == NOW


def test_fresh_state_schedules_the_first_reconcile() -> None:
    state = fresh_state(make(reconcile="1h"), "", NOW)
    assert state.reconcile_due == NOW + 3600


def test_live_beats_reconcile_beats_backfill() -> None:
    everything = replace(
        fresh_state(POLLER, "t_1", NOW),
        reconcile_due=NOW - 1,
        backfill=LaneState(active=True),
    )
    assert next_lane(everything, NOW) is Lane.LIVE
    not_live = with_interval(everything, 30.0, next_due=NOW + 10)
    assert next_lane(not_live, NOW) is Lane.RECONCILE
    only_backfill = replace(not_live, reconcile_due=NOW + 10)
    assert next_lane(only_backfill, NOW) is Lane.BACKFILL
    active_reconcile = replace(only_backfill, reconcile=LaneState(active=True, scan=1))
    assert next_lane(active_reconcile, NOW) is Lane.RECONCILE
    assert next_lane(replace(only_backfill, backfill=LaneState()), NOW) is None


@pytest.mark.parametrize("reason", ["user", "removed", "parent"])
def test_paused_key_has_no_lane(reason: Any) -> None:
    state = replace(fresh_state(POLLER, "t_1", NOW), paused=reason, backfill=LaneState(active=True))
    assert next_lane(state, NOW + 100) is None
    assert due_at(state, NOW) is None


def test_throttled_key_has_no_lane() -> None:
    state = replace(
        fresh_state(POLLER, "t_1", NOW),
        schedule=KeySchedule(interval=30.0, next_due=NOW, throttle_until=NOW + 60),
        backfill=LaneState(active=True),
    )
    assert next_lane(state, NOW + 59) is None
    assert next_lane(state, NOW + 60) is Lane.LIVE
    assert due_at(state, NOW) == NOW + 60


def test_open_circuit_has_no_lane_until_the_cooldown() -> None:
    opened = Circuit(state=CircuitState.OPEN, consecutive_failures=5, opened_at=NOW, cooldown=30)
    state = replace(fresh_state(POLLER, "t_1", NOW), circuit=opened)
    assert next_lane(state, NOW + 29) is None
    assert due_at(state, NOW) == NOW + 30
    assert next_lane(state, NOW + 30) is Lane.LIVE
    probing = begin(state, NOW + 30)
    assert probing.circuit.state is CircuitState.HALF_OPEN
    assert next_lane(probing, NOW + 31) is None  # the one probe is out
    assert due_at(probing, NOW + 31) is None


# a token poll across two pages


def test_token_poll_across_two_pages() -> None:
    state = begin(with_interval(fresh_state(POLLER, "t_1", NOW), 120.0), NOW)
    assert next_lane(state, NOW) is Lane.LIVE
    step = plan(POLLER, state, Lane.LIVE)
    assert (step.lane, step.cursor, step.fetch_value, step.page) == (Lane.LIVE, None, None, 0)

    first = emit(decide(POLLER, state, {}, step, page([item("a"), item("b")], "c1"), NOW))
    assert first.more is True
    assert [(e.type, e.subject, e.sequence) for e in first.events] == [
        ("created", "a", 1),
        ("created", "b", 2),
    ]
    assert first.state.live.cursor == "c1"
    assert first.state.sequence == 2
    assert first.state.schedule == state.schedule  # unchanged until the poll ends
    snapshot = apply({}, first)

    step2 = next_page(POLLER, step, first)
    assert (step2.cursor, step2.fetch_value, step2.page, step2.changed) == ("c1", "c1", 1, True)
    second = emit(
        decide(
            POLLER, first.state, snapshot, step2, page([item("c")], "c2", has_more=False), NOW + 2
        )
    )
    assert second.more is False
    assert [(e.subject, e.sequence) for e in second.events] == [("c", 3)]
    assert second.state.live.cursor == "c2"
    assert second.state.sequence == 3
    # AIMD: a poll with changes halves the interval; the next one is that long after this
    # one was due, not after it ended (a fixed rate).
    assert second.state.schedule.interval == 60.0
    assert second.state.schedule.next_due == NOW + 60
    assert second.state.last_success == NOW + 2


def test_changes_on_an_earlier_page_count_for_the_poll() -> None:
    state = begin(with_interval(fresh_state(POLLER, "t_1", NOW), 120.0), NOW)
    step = plan(POLLER, state, Lane.LIVE)
    first = emit(decide(POLLER, state, {}, step, page([item("a")], "c1"), NOW))
    last = emit(
        decide(
            POLLER,
            first.state,
            apply({}, first),
            next_page(POLLER, step, first),
            page([item("a")], "c1"),  # cursor did not move: the end
            NOW,
        )
    )
    assert last.events == []
    assert last.more is False
    assert last.state.schedule.interval == 60.0


def test_idle_poll_increases_the_interval() -> None:
    snapshot = {"a": SnapshotEntry(version="1", seen=NOW - 100)}
    state = begin(replace(with_interval(fresh_state(POLLER, "t_1", NOW), 120.0), sequence=9), NOW)
    result = emit(
        decide(POLLER, state, snapshot, plan(POLLER, state, Lane.LIVE), page([item("a")]), NOW)
    )
    assert result.events == []
    assert result.state.sequence == 9
    assert result.state.schedule.interval == 120.0 + 87.0
    assert result.state.schedule.next_due == NOW + 207.0


def test_a_poll_started_late_comes_back_at_its_keys_point() -> None:
    snapshot = {"a": SnapshotEntry(version="1", seen=NOW - 100)}
    state = with_interval(fresh_state(POLLER, "t_1", NOW), 120.0, next_due=NOW - 40)
    on_time = plan(POLLER, state, Lane.LIVE, NOW - 40)
    late = plan(POLLER, state, Lane.LIVE, NOW)
    assert (on_time.late, late.late) == (0.0, 40.0)
    assert plan(POLLER, state, Lane.RECONCILE, NOW).late == 0.0  # only the live lane is due
    result = emit(decide(POLLER, begin(state, NOW), snapshot, late, page([item("a")]), NOW))
    sched = result.state.schedule
    assert sched.interval == 207.0
    assert NOW + 103.5 <= sched.next_due < NOW + 310.5
    point = phase_of(state.key) * 207.0
    assert (sched.next_due - point) % 207.0 == pytest.approx(0.0, abs=1e-6) or (
        sched.next_due - point
    ) % 207.0 == pytest.approx(207.0, abs=1e-6)
    punctual = emit(decide(POLLER, begin(state, NOW), snapshot, on_time, page([item("a")]), NOW))
    assert punctual.state.schedule.next_due == NOW - 40 + 207.0  # from when it was due
    # Every page of the poll carries it: the page that ends the poll decides the next one.
    second = next_page(
        POLLER, late, emit(decide(POLLER, state, {}, late, page([], "c", True), NOW))
    )
    assert second.late == 40.0


def test_page_limit_ends_the_poll_due_again_now() -> None:
    poller = make(max_pages=2)
    state = begin(with_interval(fresh_state(poller, "t_1", NOW), 120.0), NOW)
    step = plan(poller, state, Lane.LIVE)
    first = emit(decide(poller, state, {}, step, page([item("a")], "c1"), NOW))
    assert first.more is True and first.at_limit is False
    step2 = next_page(poller, step, first)
    second = emit(
        decide(poller, first.state, apply({}, first), step2, page([item("b")], "c2"), NOW + 5)
    )
    assert second.more is False  # the limit, although the vendor has more
    assert second.at_limit is True
    assert second.state.live.cursor == "c2"
    assert second.state.schedule.next_due == NOW + 5
    assert second.state.schedule.interval == 120.0
    assert next_lane(second.state, NOW + 5) is Lane.LIVE
    # A listing that ends on the limit's page is done: the poll did not stop short.
    last = emit(
        decide(
            poller, first.state, apply({}, first), step2, page([item("b")], "c2", False), NOW + 5
        )
    )
    assert last.more is False and last.at_limit is False


def test_not_modified_is_an_idle_poll() -> None:
    state = with_interval(fresh_state(POLLER, "t_1", NOW), 120.0)
    state = begin(replace(state, live=LaneState(cursor="c5"), sequence=4), NOW)
    step = plan(POLLER, state, Lane.LIVE)
    # Whatever the result holds, a 304 says nothing changed.
    result = emit(decide(POLLER, state, {}, step, page([item("x")], "c9", not_modified=True), NOW))
    assert result.events == []
    assert result.upserts == {}
    assert result.more is False and result.at_limit is False
    assert result.state.live.cursor == "c5"
    assert result.state.sequence == 4
    assert result.state.schedule.interval == 207.0


def test_validators_are_stored_per_url() -> None:
    state = begin(fresh_state(POLLER, "t_1", NOW), NOW)
    tag = Validators(etag='"abc"')
    result = emit(
        decide(
            POLLER,
            state,
            {},
            plan(POLLER, state, Lane.LIVE),
            page([], validators={"https://x/a": tag}),
            NOW,
        )
    )
    assert result.state.validators_for("https://x/a") == tag
    assert result.state.validators_for("https://x/b") is None


def test_none_strategy_cursor_returns_to_none_after_the_scan() -> None:
    poller = make(cursor={"strategy": "none"})
    state = begin(fresh_state(poller, "t_1", NOW), NOW)
    step = plan(poller, state, Lane.LIVE)
    first = emit(decide(poller, state, {}, step, page([item("a")], "p2"), NOW))
    assert (first.more, first.state.live.cursor) == (True, "p2")
    second = emit(
        decide(
            poller,
            first.state,
            apply({}, first),
            next_page(poller, step, first),
            page([item("b")]),
            NOW,
        )
    )
    assert (second.more, second.state.live.cursor) == (False, None)


def test_timestamp_live_poll_advances_the_watermark_and_fetches_with_lookback() -> None:
    poller = make(cursor={"strategy": "timestamp", "field": "at", "lookback": "1m"})
    state = replace(fresh_state(poller, "t_1", NOW), live=LaneState(cursor="2026-01-01T00:10:00Z"))
    step = plan(poller, state, Lane.LIVE)
    assert step.fetch_value == "2026-01-01T00:09:00Z"
    items = [item("a", at="2026-01-01T00:20:00Z"), item("b", at="2026-01-01T00:15:00Z")]
    result = emit(decide(poller, begin(state, NOW), {}, step, page(items), NOW))
    assert result.more is False
    assert result.state.live.cursor == "2026-01-01T00:20:00Z"


def test_replay_reemits_and_stops_replaying_at_the_end() -> None:
    snapshot = {"a": SnapshotEntry(version="1", seen=NOW - 100)}
    state = replace(fresh_state(POLLER, "t_1", NOW), live=LaneState(replaying=True), sequence=3)
    state = begin(state, NOW)
    step = plan(POLLER, state, Lane.LIVE)
    assert step.replaying is True
    first = emit(decide(POLLER, state, snapshot, step, page([item("a")], "c1"), NOW))
    assert [(e.type, e.sequence) for e in first.events] == [("updated", 4)]
    assert first.events[0].id == event_id("invoices", "t_1", "a", "1")
    assert first.state.live.replaying is True  # not caught up yet
    second = emit(
        decide(
            POLLER,
            first.state,
            apply(snapshot, first),
            next_page(POLLER, step, first),
            page([]),
            NOW,
        )
    )
    assert second.state.live.replaying is False


# failures and the circuit


def test_failure_backs_off_and_counts() -> None:
    state = replace(fresh_state(POLLER, "t_1", NOW), live=LaneState(cursor="c1"))
    step = plan(POLLER, state, Lane.LIVE)
    first = decide(POLLER, begin(state, NOW), {}, step, Failure("HTTP 500"), NOW)
    assert isinstance(first, Backoff)
    assert first.reason == "HTTP 500"
    assert first.state.circuit.consecutive_failures == 1
    assert first.state.circuit.state is CircuitState.CLOSED
    assert first.state.live.cursor == "c1"
    assert first.state.sequence == 0
    assert first.state.last_error == "HTTP 500"
    assert first.state.schedule.next_due == NOW + 30
    second = decide(POLLER, begin(first.state, NOW + 30), {}, step, Failure("HTTP 500"), NOW + 30)
    assert isinstance(second, Backoff)
    assert second.state.circuit.consecutive_failures == 2
    assert second.state.schedule.next_due == NOW + 30 + 60
    assert second.state.schedule.interval == first.state.schedule.interval


def test_success_after_failures_resets_the_circuit() -> None:
    state = fresh_state(POLLER, "t_1", NOW)
    step = plan(POLLER, state, Lane.LIVE)
    failed = decide(POLLER, begin(state, NOW), {}, step, Failure("boom"), NOW)
    ok = emit(decide(POLLER, begin(failed.state, NOW + 30), {}, step, page([]), NOW + 30))
    assert ok.state.circuit == Circuit()
    assert ok.state.last_error is None
    assert ok.state.last_success == NOW + 30


def test_failures_reaching_the_threshold_trip_the_circuit() -> None:
    poller = make(circuit={"failure_threshold": 3, "cooldown": "2m"})
    state = replace(fresh_state(poller, "t_1", NOW), live=LaneState(cursor="c1"))
    step = plan(poller, state, Lane.LIVE)
    now = NOW
    decisions: list[Decision] = []
    for _ in range(3):
        decision = decide(poller, begin(state, now), {}, step, Failure("down"), now)
        decisions.append(decision)
        state = decision.state
        now = max(now, state.schedule.next_due)
    assert [type(d) for d in decisions] == [Backoff, Backoff, Trip]
    tripped_at = state.circuit.opened_at
    assert tripped_at is not None
    assert state.circuit.state is CircuitState.OPEN
    assert state.circuit.state.value == "open"
    assert state.circuit.consecutive_failures == 3
    assert state.live.cursor == "c1"
    assert state.schedule.next_due >= tripped_at + 120
    assert next_lane(state, tripped_at + 119) is None
    assert next_lane(state, tripped_at + 120) is Lane.LIVE


def test_failed_probe_trips_again_with_a_longer_cooldown() -> None:
    opened = Circuit(state=CircuitState.OPEN, consecutive_failures=5, opened_at=NOW, cooldown=30)
    state = replace(fresh_state(POLLER, "t_1", NOW), circuit=opened)
    probe = begin(state, NOW + 30)
    decision = decide(POLLER, probe, {}, plan(POLLER, probe, Lane.LIVE), Failure("x"), NOW + 30)
    assert isinstance(decision, Trip)
    assert decision.state.circuit.state is CircuitState.OPEN
    assert decision.state.schedule.next_due == NOW + 30 + 60
    assert next_lane(decision.state, NOW + 89) is None


def test_throttled_failure_leaves_the_circuit_alone() -> None:
    state = fresh_state(POLLER, "t_1", NOW)
    step = plan(POLLER, state, Lane.LIVE)
    decision = decide(
        POLLER, begin(state, NOW), {}, step, Failure("HTTP 429", throttle_until=NOW + 500), NOW
    )
    assert isinstance(decision, Backoff)
    assert decision.state.circuit == state.circuit
    assert decision.state.schedule.next_due >= NOW + 500
    assert decision.state.schedule.throttle_until == NOW + 500
    assert next_lane(decision.state, NOW + 499) is None
    assert next_lane(decision.state, NOW + 500) is Lane.LIVE


def test_throttled_probe_can_be_sent_again() -> None:
    opened = Circuit(state=CircuitState.OPEN, consecutive_failures=5, opened_at=NOW, cooldown=30)
    probe = begin(replace(fresh_state(POLLER, "t_1", NOW), circuit=opened), NOW + 30)
    step = plan(POLLER, probe, Lane.LIVE)
    decision = decide(POLLER, probe, {}, step, Failure("429", throttle_until=NOW + 90), NOW + 30)
    assert isinstance(decision, Backoff)
    assert decision.state.circuit.probe_in_flight is False
    assert next_lane(decision.state, NOW + 90) is Lane.LIVE


def test_page_throttle_pushes_the_next_poll() -> None:
    state = begin(fresh_state(POLLER, "t_1", NOW), NOW)
    step = plan(POLLER, state, Lane.LIVE)
    result = emit(decide(POLLER, state, {}, step, page([], throttle_until=NOW + 2000), NOW))
    assert result.state.schedule.next_due >= NOW + 2000
    assert next_lane(result.state, NOW + 1999) is None


# reconcile


def test_reconcile_pass_emits_deleted_for_unseen_items() -> None:
    poller = make(reconcile="1h")
    snapshot = {
        ident: SnapshotEntry(version="1", seen=NOW - 100, scan=0) for ident in ("a", "b", "c")
    }
    state = idle_state(poller, reconcile_due=NOW, sequence=10)
    assert next_lane(state, NOW) is Lane.RECONCILE
    state = begin(state, NOW)
    step = plan(poller, state, Lane.RECONCILE)
    assert (step.cursor, step.scan) == (None, 1)

    first = emit(decide(poller, state, snapshot, step, page([item("a")], "r2"), NOW))
    assert first.more is True
    assert first.events == []
    assert first.state.reconcile == LaneState(cursor="r2", active=True, scan=1)
    assert first.state.schedule == state.schedule
    snapshot = apply(snapshot, first)
    assert next_lane(first.state, NOW + 1) is Lane.RECONCILE

    step2 = next_page(poller, step, first)
    assert (step2.cursor, step2.scan) == ("r2", 1)
    last = emit(decide(poller, first.state, snapshot, step2, page([item("c", "2")]), NOW + 1))
    assert last.more is False
    assert [(e.type, e.subject, e.sequence, e.lane) for e in last.events] == [
        ("updated", "c", 11, "reconcile"),
        ("deleted", "b", 12, "reconcile"),
    ]
    assert last.upserts["b"].deleted == NOW + 1
    assert last.state.sequence == 12
    assert last.state.reconcile == LaneState(cursor=None, active=False, scan=1)
    assert last.state.reconcile_due == NOW + 1 + 3600
    assert last.state.schedule == state.schedule
    assert next_lane(last.state, NOW + 2) is None


def test_next_reconcile_pass_uses_a_new_scan_number() -> None:
    poller = make(reconcile="1h")
    state = idle_state(poller, reconcile=LaneState(scan=1), reconcile_due=NOW)
    step = plan(poller, state, Lane.RECONCILE)
    assert step.scan == 2
    resumed = replace(state, reconcile=LaneState(cursor="r7", active=True, scan=2))
    step = plan(poller, resumed, Lane.RECONCILE)
    assert (step.cursor, step.scan) == ("r7", 2)


def test_reconcile_without_period_is_not_rescheduled() -> None:
    state = idle_state(reconcile_due=NOW)
    state = begin(state, NOW)
    step = plan(POLLER, state, Lane.RECONCILE)
    result = emit(decide(POLLER, state, {}, step, page([]), NOW))
    assert result.state.reconcile_due is None


def test_reconcile_forgets_deleted_entries_older_than_retain() -> None:
    poller = make(reconcile="1h", retain="30d")
    snapshot = {
        "a": SnapshotEntry(version="1", seen=NOW - 100, scan=0),
        "gone": SnapshotEntry(version="1", seen=NOW - 40 * DAY, scan=0, deleted=NOW - 31 * DAY),
        "recent": SnapshotEntry(version="1", seen=NOW - 2 * DAY, scan=0, deleted=NOW - DAY),
    }
    state = begin(idle_state(poller, reconcile_due=NOW), NOW)
    result = emit(
        decide(poller, state, snapshot, plan(poller, state, Lane.RECONCILE), page([item("a")]), NOW)
    )
    assert result.events == []
    assert result.forget == ["gone"]
    assert "gone" not in result.upserts
    assert set(apply(snapshot, result)) == {"a", "recent"}


def test_not_modified_reconcile_page_deletes_nothing() -> None:
    poller = make(reconcile="1h")
    snapshot = {i: SnapshotEntry(version="1", seen=NOW - 100) for i in ("a", "b")}
    state = begin(idle_state(poller, reconcile_due=NOW), NOW)
    step = plan(poller, state, Lane.RECONCILE)
    result = emit(decide(poller, state, snapshot, step, page([], not_modified=True), NOW))
    assert [e.type for e in result.events if e.type == "deleted"] == []


def test_item_created_during_a_reconcile_pass_is_not_deleted() -> None:
    poller = make(reconcile="1h")
    # A pass (scan 1) is under way and has seen "a"; "b" was known before.
    snapshot = {
        "a": SnapshotEntry(version="1", seen=NOW - 5, scan=1),
        "b": SnapshotEntry(version="1", seen=NOW - 100, scan=0),
    }
    state = replace(
        fresh_state(poller, "t_1", NOW - 100),
        reconcile=LaneState(cursor="r2", active=True, scan=1),
    )
    # A live poll sees the new item "x" (on a page the pass has already read).
    state = begin(state, NOW)
    live = emit(
        decide(poller, state, snapshot, plan(poller, state, Lane.LIVE), page([item("x")]), NOW)
    )
    assert [(e.type, e.subject) for e in live.events] == [("created", "x")]
    snapshot = apply(snapshot, live)
    # The pass reads its last page and ends.
    state = begin(live.state, NOW + 1)
    step = plan(poller, state, Lane.RECONCILE)
    assert step.scan == 1
    last = emit(decide(poller, state, snapshot, step, page([item("b")]), NOW + 1))
    assert [(e.type, e.subject) for e in last.events if e.type == "deleted"] == []


# backfill


TS_POLLER = make(cursor={"strategy": "timestamp", "field": "at"}, reconcile="1h")
UNTIL = "2026-01-10T00:00:00Z"


def backfill_state() -> PartitionState:
    return idle_state(
        TS_POLLER,
        live=LaneState(cursor=UNTIL),
        backfill=LaneState(cursor=None, active=True, until=UNTIL),
        reconcile_due=NOW + 7200,
    )


def test_backfill_with_a_timestamp_cursor_stops_at_until() -> None:
    state = backfill_state()
    assert next_lane(state, NOW) is Lane.BACKFILL
    state = begin(state, NOW)
    step = plan(TS_POLLER, state, Lane.BACKFILL)
    assert step.cursor is None
    early = [item("a", at="2026-01-01T00:00:00Z"), item("b", at="2026-01-05T00:00:00Z")]
    first = emit(decide(TS_POLLER, state, {}, step, page(early, has_more=True), NOW))
    assert first.more is True
    assert first.state.backfill.active is True
    assert first.state.backfill.cursor == "2026-01-05T00:00:00Z"
    assert [e.lane for e in first.events] == ["backfill", "backfill"]
    assert first.state.live.cursor == UNTIL
    assert first.state.schedule == state.schedule

    step2 = next_page(TS_POLLER, step, first)
    assert step2.cursor == "2026-01-05T00:00:00Z"
    late = [item("c", at="2026-01-10T00:00:00Z")]
    last = emit(
        decide(TS_POLLER, first.state, apply({}, first), step2, page(late, has_more=True), NOW)
    )
    assert last.more is False  # the vendor has more, but the backfill reached `until`
    assert last.state.backfill.active is False
    assert last.state.live.cursor == UNTIL
    assert next_lane(last.state, NOW + 1) is None


def test_timestamp_backfill_goes_on_while_the_watermark_moves() -> None:
    state = begin(backfill_state(), NOW)
    step = plan(TS_POLLER, state, Lane.BACKFILL)
    early = [item("a", at="2026-01-01T00:00:00Z")]
    result = emit(decide(TS_POLLER, state, {}, step, page(early), NOW))
    assert result.state.backfill.active is True


def test_timestamp_reconcile_does_not_end_after_one_page() -> None:
    snapshot = {i: SnapshotEntry(version="1", seen=NOW - 100) for i in ("a", "b")}
    state = begin(idle_state(TS_POLLER, reconcile_due=NOW), NOW)
    step = plan(TS_POLLER, state, Lane.RECONCILE)
    result = emit(
        decide(TS_POLLER, state, snapshot, step, page([item("a", at="2026-01-01T00:00:00Z")]), NOW)
    )
    assert [e.subject for e in result.events if e.type == "deleted"] == []


# plan


def test_plan_of_a_lane_uses_its_cursor() -> None:
    state = replace(
        fresh_state(POLLER, "t_1", NOW),
        live=LaneState(cursor="L"),
        backfill=LaneState(cursor="B", active=True),
    )
    assert plan(POLLER, state, Lane.LIVE) == PollPlan(lane=Lane.LIVE, cursor="L", fetch_value="L")
    backfill = plan(POLLER, state, Lane.BACKFILL)
    assert (backfill.cursor, backfill.scan, backfill.replaying) == ("B", None, False)


# persisted state


def rich_state() -> PartitionState:
    return PartitionState(
        poller="invoices",
        partition="t_1",
        live=LaneState(cursor={"page": 3, "token": "x"}, replaying=True),
        schedule=KeySchedule(interval=120.0, next_due=NOW + 120, throttle_until=NOW + 60),
        backfill=LaneState(cursor="2026-01-01T00:00:00Z", active=True, until=UNTIL),
        reconcile=LaneState(cursor="r4", active=True, scan=7),
        reconcile_due=NOW + 3600,
        circuit=Circuit(
            state=CircuitState.OPEN, consecutive_failures=5, opened_at=NOW, cooldown=60.0
        ),
        sequence=42,
        validators=(
            ("https://a/1", Validators(etag='"e1"')),
            ("https://a/2", Validators(last_modified="Wed, 21 Oct 2026 07:28:00 GMT")),
        ),
        paused="user",
        epoch=3,
        last_success=NOW - 10,
        last_error="HTTP 500",
        created=NOW - DAY,
    )


def test_state_round_trips_through_json() -> None:
    state = rich_state()
    raw = state.to_dict()
    assert raw["circuit"]["state"] == "open"
    assert raw["validators"]["https://a/1"]["etag"] == '"e1"'
    restored = PartitionState.from_dict(json.loads(json.dumps(raw)))
    assert restored == state
    assert restored.circuit.state is CircuitState.OPEN


def test_fresh_state_round_trips() -> None:
    state = fresh_state(POLLER, "", NOW)
    assert PartitionState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def garbage_variants() -> list[Any]:
    good = rich_state().to_dict()
    variants: list[Any] = [None, "state", 42, [], {}]
    for key in ("poller", "live", "circuit", "schedule", "sequence", "validators", "backfill"):
        variants.append({k: v for k, v in good.items() if k != key})
    variants.append({**good, "circuit": {**good["circuit"], "state": "ajar"}})
    variants.append({**good, "live": {"cursor": 1, "color": "red"}})
    variants.append({**good, "live": "c1"})
    variants.append({**good, "sequence": "many"})
    variants.append({**good, "schedule": {"interval": 1}})
    return variants


@pytest.mark.parametrize("raw", garbage_variants())
def test_garbage_state_is_corrupted(raw: Any) -> None:
    with pytest.raises(StateCorrupted):
        PartitionState.from_dict(raw)


@pytest.mark.parametrize("validators", [[], None, "etag"])
def test_garbage_validators_are_corrupted(validators: Any) -> None:
    raw = {**rich_state().to_dict(), "validators": validators}
    with pytest.raises(StateCorrupted):
        PartitionState.from_dict(raw)


def test_parked_item_round_trips_and_rejects_garbage() -> None:
    parked = ParkedItem(
        id="p1",
        poller="invoices",
        partition="t_1",
        kind="poison",
        item={"id": "a"},
        error="handler failed",
        attempts=5,
        parked_at=NOW,
        subject="a",
        event={"id": "e1"},
    )
    assert ParkedItem.from_dict(json.loads(json.dumps(parked.to_dict()))) == parked
    with pytest.raises(StateCorrupted):
        ParkedItem.from_dict({"id": "p1"})
    with pytest.raises(StateCorrupted):
        ParkedItem.from_dict({**parked.to_dict(), "colour": "red"})
