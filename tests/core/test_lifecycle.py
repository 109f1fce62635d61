"""The key lifecycle's transition table and the connector targets (watukuy.core.lifecycle)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from watukuy.core.errors import ConfigError, IllegalTransition
from watukuy.core.lifecycle import (
    HELD,
    MOVES,
    KeyPhase,
    Target,
    held_phase,
    move,
    parse_target,
)
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller

pytestmark = pytest.mark.unit

P = KeyPhase

LEGAL = sorted(
    ((a, b) for a, targets in MOVES.items() for b in targets), key=lambda m: (m[0].name, m[1].name)
)
ILLEGAL = sorted(
    ((a, b) for a in KeyPhase for b in KeyPhase if b not in MOVES[a]),
    key=lambda m: (m[0].name, m[1].name),
)


def test_the_table_covers_every_phase() -> None:
    assert set(MOVES) == set(KeyPhase)
    assert {P.ACTIVE, P.PAUSED_BY_USER} == HELD


@pytest.mark.parametrize(("start", "to"), LEGAL, ids=lambda p: p.name)
def test_every_legal_move(start: KeyPhase, to: KeyPhase) -> None:
    assert move(start, to) is to


@pytest.mark.parametrize(("start", "to"), ILLEGAL, ids=lambda p: p.name)
def test_every_other_move_raises_naming_both_phases(start: KeyPhase, to: KeyPhase) -> None:
    with pytest.raises(
        IllegalTransition, match=f"t/1: a key cannot go from {start.name} to {to.name}"
    ):
        move(start, to, "t/1")


def test_the_moves_that_matter() -> None:
    # Held keys are paused and resumed, idempotently; a key let go comes back only restored.
    assert {P.ACTIVE, P.PAUSED_BY_USER} <= MOVES[P.ACTIVE] & MOVES[P.PAUSED_BY_USER]
    for gone in (P.PAUSED_REMOVED, P.FENCED, P.STOPPED, P.REMOVED):
        assert P.RESTORING in MOVES[gone]
        assert not MOVES[gone] & HELD
    # A fenced key is not then marked removed or stopped by this instance: it is not ours.
    assert MOVES[P.FENCED] == {P.RESTORING}
    # Restoring ends held, or let go when ownership, the connector or a removal intervenes,
    # or waiting when the stored state comes from a newer release.
    assert MOVES[P.RESTORING] == {
        P.ACTIVE,
        P.PAUSED_BY_USER,
        P.FENCED,
        P.STOPPED,
        P.REMOVED,
        P.WAITING_NEWER,
    }
    assert P.PAUSED_REMOVED not in MOVES[P.RESTORING]


def test_a_key_waiting_for_a_newer_release_is_never_held_only_let_go() -> None:
    assert P.WAITING_NEWER not in HELD
    assert MOVES[P.WAITING_NEWER] == {P.PAUSED_REMOVED, P.FENCED, P.STOPPED, P.REMOVED}
    # Only a restore finds a newer value: a held key does not start waiting.
    assert [a for a, targets in MOVES.items() if P.WAITING_NEWER in targets] == [P.RESTORING]
    with pytest.raises(IllegalTransition, match="from WAITING_NEWER to ACTIVE"):
        move(P.WAITING_NEWER, P.ACTIVE)


def test_the_held_phase_follows_the_stored_pause_flag() -> None:
    poller = define_poller(name="p", fetch=lambda ctx: None, identity=lambda i: i["id"])
    state = fresh_state(poller, "", 0.0)
    assert held_phase(state) is P.ACTIVE
    assert held_phase(replace(state, paused="user")) is P.PAUSED_BY_USER
    # The flag of an earlier removal is cleared as the key is held again.
    assert held_phase(replace(state, paused="removed")) is P.ACTIVE


def test_targets() -> None:
    assert [t.value for t in Target] == ["RUNNING", "PAUSED", "STOPPED"]
    assert [t.holds_keys for t in Target] == [True, True, False]
    assert [t.polls for t in Target] == [True, False, False]
    assert parse_target("PAUSED") is Target.PAUSED
    assert parse_target("stopped") is Target.STOPPED  # as Connect reads initial_state
    assert parse_target(Target.RUNNING) is Target.RUNNING


@pytest.mark.parametrize("bad", ["PAUSE", "", None, 1])
def test_a_bad_target_names_the_field_and_the_choices(bad: object) -> None:
    with pytest.raises(ConfigError, match="must be one of: RUNNING, PAUSED, STOPPED") as raised:
        parse_target(bad, "initial_state")
    assert raised.value.path == "initial_state"
