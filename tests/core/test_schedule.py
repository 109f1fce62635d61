from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.schedule import (
    KeySchedule,
    ScheduleSpec,
    after_poll,
    backoff,
    initial,
    is_due,
    throttle,
    trigger,
)

pytestmark = pytest.mark.unit

SPEC = ScheduleSpec(min=30.0, max=900.0)


def test_initial_is_due_now_at_min() -> None:
    sched = initial(SPEC, now=100.0)
    assert sched == KeySchedule(interval=30.0, next_due=100.0, throttle_until=0.0)
    assert is_due(sched, 100.0)
    assert not is_due(sched, 99.0)


def test_default_step_reaches_max_in_ten_idle_polls() -> None:
    assert SPEC.step == pytest.approx(87.0)
    sched = initial(SPEC, 0.0)
    for i in range(10):
        sched = after_poll(SPEC, sched, float(i), changed=False)
    assert sched.interval == pytest.approx(900.0)
    sched = after_poll(SPEC, sched, 10.0, changed=False)
    assert sched.interval == 900.0
    assert sched.next_due == 910.0


def test_explicit_increase() -> None:
    spec = ScheduleSpec(min=10.0, max=100.0, increase=5.0)
    sched = after_poll(spec, initial(spec, 0.0), 0.0, changed=False)
    assert sched.interval == 15.0
    assert sched.next_due == 15.0


def test_change_halves_interval_floored_at_min() -> None:
    sched = KeySchedule(interval=800.0, next_due=0.0)
    sched = after_poll(SPEC, sched, 1000.0, changed=True)
    assert sched.interval == 400.0
    assert sched.next_due == 1400.0
    for _ in range(10):
        sched = after_poll(SPEC, sched, 1000.0, changed=True)
    assert sched.interval == 30.0


def test_out_of_range_interval_is_clamped() -> None:
    sched = KeySchedule(interval=5000.0, next_due=0.0)
    assert after_poll(SPEC, sched, 0.0, changed=False).interval == 900.0
    assert backoff(SPEC, KeySchedule(interval=1.0, next_due=0.0), 0.0, 5.0).interval == 30.0


def test_throttle_pushes_next_due_and_only_grows() -> None:
    sched = initial(SPEC, 0.0)
    sched = throttle(sched, 120.0)
    assert sched.next_due == 120.0 and sched.throttle_until == 120.0
    assert not is_due(sched, 119.0)
    sched = throttle(sched, 60.0)
    assert sched.throttle_until == 120.0
    # a poll that saw a change right after still respects the window
    assert after_poll(SPEC, sched, 10.0, changed=True).next_due == 120.0


def test_throttle_does_not_pull_next_due_earlier() -> None:
    sched = KeySchedule(interval=300.0, next_due=500.0)
    assert throttle(sched, 100.0).next_due == 500.0


def test_trigger_is_due_now_unless_throttled() -> None:
    sched = KeySchedule(interval=300.0, next_due=500.0)
    assert trigger(sched, 10.0) == KeySchedule(interval=300.0, next_due=10.0)
    throttled = throttle(sched, 700.0)
    assert trigger(throttled, 10.0).next_due == 700.0


def test_backoff_keeps_interval_and_respects_throttle() -> None:
    sched = KeySchedule(interval=120.0, next_due=0.0)
    after = backoff(SPEC, sched, 50.0, 8.0)
    assert after == KeySchedule(interval=120.0, next_due=58.0)
    assert backoff(SPEC, sched, 50.0, -3.0).next_due == 50.0
    assert backoff(SPEC, throttle(sched, 100.0), 50.0, 8.0).next_due == 100.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min": 0.0, "max": 10.0},
        {"min": 10.0, "max": 5.0},
        {"min": 1.0, "max": 5.0, "increase": 0.0},
        {"min": 1.0, "max": 5.0, "decrease_factor": 0.0},
        {"min": 1.0, "max": 5.0, "decrease_factor": 1.5},
        {"min": float("nan"), "max": 5.0},
    ],
)
def test_bad_spec_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ScheduleSpec(**kwargs)


specs = st.builds(
    lambda lo, span, inc, factor: ScheduleSpec(
        min=lo, max=lo + span, increase=inc, decrease_factor=factor
    ),
    st.floats(0.1, 1000.0),
    st.floats(0.0, 10_000.0),
    st.none() | st.floats(0.01, 5000.0),
    st.floats(0.01, 1.0),
)

steps = st.one_of(
    st.tuples(st.just("poll"), st.floats(0.0, 1000.0), st.booleans()),
    st.tuples(st.just("throttle"), st.floats(0.0, 5000.0), st.booleans()),
    st.tuples(st.just("trigger"), st.floats(0.0, 1000.0), st.booleans()),
    st.tuples(st.just("backoff"), st.floats(-10.0, 1000.0), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(spec=specs, ops=st.lists(steps, max_size=40), start=st.floats(0.0, 1e6))
def test_invariants_hold_for_any_sequence(
    spec: ScheduleSpec, ops: list[tuple[str, float, bool]], start: float
) -> None:
    now = start
    sched = initial(spec, now)
    for op, amount, flag in ops:
        if op == "poll":
            now += amount
            sched = after_poll(spec, sched, now, changed=flag)
        elif op == "throttle":
            sched = throttle(sched, now + amount)
        elif op == "trigger":
            now += amount
            sched = trigger(sched, now)
        else:
            sched = backoff(spec, sched, now, amount)
        assert spec.min <= sched.interval <= spec.max
        assert sched.next_due >= sched.throttle_until
