from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.circuit import (
    TRANSITIONS,
    Circuit,
    CircuitEvent,
    CircuitSpec,
    CircuitState,
)
from watukuy.core.errors import IllegalTransition

pytestmark = pytest.mark.unit

SPEC = CircuitSpec(failure_threshold=3, cooldown=10.0, max_cooldown=35.0, multiplier=2.0)


def fail(circuit: Circuit, now: float, times: int = 1) -> Circuit:
    for _ in range(times):
        circuit = circuit.attempt(now).on_failure(SPEC, now)
    return circuit


def test_public_state_values() -> None:
    assert [s.value for s in CircuitState] == ["closed", "open", "half-open"]


def test_full_cycle_closed_open_half_open_closed() -> None:
    circuit = Circuit()
    assert circuit.allows(0.0) and circuit.ready_at(0.0) == 0.0

    circuit = fail(circuit, 0.0, times=2)
    assert circuit.state is CircuitState.CLOSED and circuit.consecutive_failures == 2

    circuit = fail(circuit, 1.0)
    assert circuit.state is CircuitState.OPEN
    assert circuit.opened_at == 1.0 and circuit.cooldown == 10.0
    assert not circuit.allows(10.9)
    assert circuit.ready_at(5.0) == 11.0

    assert circuit.allows(11.0)
    circuit = circuit.attempt(11.0)
    assert circuit.state is CircuitState.HALF_OPEN and circuit.probe_in_flight

    circuit = circuit.on_success(12.0)
    assert circuit == Circuit()


def test_success_resets_failure_count() -> None:
    circuit = fail(Circuit(), 0.0, times=2).attempt(0.0).on_success(0.0)
    circuit = fail(circuit, 0.0, times=2)
    assert circuit.state is CircuitState.CLOSED


def test_only_one_probe() -> None:
    circuit = fail(Circuit(), 0.0, times=3).attempt(10.0)
    assert not circuit.allows(10.0)
    assert not circuit.allows(1e9)
    assert circuit.ready_at(10.0) is None
    with pytest.raises(IllegalTransition):
        circuit.attempt(20.0)


def test_cooldown_grows_and_is_capped() -> None:
    circuit = fail(Circuit(), 0.0, times=3)
    cooldowns = [circuit.cooldown]
    now = 0.0
    for _ in range(4):
        now = circuit.ready_at(now) or now
        circuit = circuit.attempt(now).on_failure(SPEC, now)
        assert circuit.state is CircuitState.OPEN and circuit.opened_at == now
        cooldowns.append(circuit.cooldown)
    assert cooldowns == [10.0, 20.0, 35.0, 35.0, 35.0]
    # a success closes and forgets the long cooldown
    now = circuit.ready_at(now) or now
    circuit = circuit.attempt(now).on_success(now)
    circuit = fail(circuit, now, times=3)
    assert circuit.cooldown == 10.0


def test_cancelled_probe_allows_another() -> None:
    circuit = fail(Circuit(), 0.0, times=3).attempt(10.0).on_cancel()
    assert circuit.state is CircuitState.HALF_OPEN and not circuit.probe_in_flight
    assert circuit.allows(10.0) and circuit.ready_at(10.0) == 10.0
    assert circuit.attempt(10.0).probe_in_flight


def test_illegal_transitions_raise() -> None:
    opened = fail(Circuit(), 0.0, times=3)
    with pytest.raises(IllegalTransition):
        opened.on_success(1.0)
    with pytest.raises(IllegalTransition):
        opened.on_failure(SPEC, 1.0)
    with pytest.raises(IllegalTransition):
        opened.on_cancel()
    with pytest.raises(IllegalTransition):
        opened.attempt(5.0)  # cooldown not over
    idle_half_open = opened.attempt(10.0).on_cancel()
    with pytest.raises(IllegalTransition):
        idle_half_open.on_success(10.0)
    with pytest.raises(IllegalTransition):
        idle_half_open.on_failure(SPEC, 10.0)


def test_transition_table_lists_no_move_out_of_open_but_the_probe() -> None:
    from_open = {event for (state, event) in TRANSITIONS if state is CircuitState.OPEN}
    assert from_open == {CircuitEvent.ATTEMPT}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"failure_threshold": 0},
        {"cooldown": 0.0},
        {"cooldown": 10.0, "max_cooldown": 5.0},
        {"multiplier": 0.5},
    ],
)
def test_bad_spec_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CircuitSpec(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    outcomes=st.lists(st.sampled_from(["ok", "fail", "cancel"]), max_size=60),
    gaps=st.lists(st.floats(0.0, 50.0), min_size=60, max_size=60),
)
def test_random_outcomes_follow_the_rules(outcomes: list[str], gaps: list[float]) -> None:
    circuit = Circuit()
    now = 0.0
    for outcome, gap in zip(outcomes, gaps, strict=False):
        now += gap
        if not circuit.allows(now):
            ready = circuit.ready_at(now)
            assert ready is not None and ready > now
            continue
        circuit = circuit.attempt(now)
        if circuit.state is CircuitState.HALF_OPEN:
            assert not circuit.allows(now)
        if outcome == "ok":
            circuit = circuit.on_success(now)
            assert circuit == Circuit()
        elif outcome == "fail":
            circuit = circuit.on_failure(SPEC, now)
        else:
            circuit = circuit.on_cancel()
        assert circuit.state is not CircuitState.OPEN or (
            SPEC.cooldown <= circuit.cooldown <= SPEC.max_cooldown
        )
        assert circuit.probe_in_flight is False
