"""The partition state written by hand (``serde.state_binary.partition_state``) is byte for
byte what fastavro writes from the record every state took to it before; anything the
hand-written path leaves (a value of an unexpected type) gets what fastavro gives."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.schedule import KeySchedule
from watukuy.core.state import LaneState, PartitionState, Validators
from watukuy.serde import framing, state_binary
from watukuy.serde.state import (
    FORMAT_VERSION,
    SCHEMAS,
    STATE,
    _optional_json,
    _state_record,
    decode_state,
    encode_state,
)

LONG = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=20) | st.text(min_size=130, max_size=300)
DOUBLE = st.floats(allow_nan=False) | st.integers(-(2**53), 2**53)
MAYBE_DOUBLE = st.none() | DOUBLE
CURSOR = st.none() | TEXT | LONG | st.dictionaries(TEXT, st.integers() | TEXT, max_size=3)

VALIDATORS = st.builds(Validators, etag=st.none() | TEXT, last_modified=st.none() | TEXT)
LANES = st.builds(
    LaneState,
    cursor=CURSOR,
    active=st.booleans(),
    replaying=st.booleans(),
    scan=LONG,
    until=CURSOR,
)
STATES = st.builds(
    PartitionState,
    poller=TEXT,
    partition=TEXT,
    live=LANES,
    schedule=st.builds(KeySchedule, interval=DOUBLE, next_due=DOUBLE, throttle_until=DOUBLE),
    backfill=LANES,
    reconcile=LANES,
    reconcile_due=MAYBE_DOUBLE,
    circuit=st.builds(
        Circuit,
        state=st.sampled_from(list(CircuitState)),
        consecutive_failures=LONG,
        opened_at=MAYBE_DOUBLE,
        cooldown=DOUBLE,
        probe_in_flight=st.booleans(),
    ),
    sequence=LONG,
    validators=st.lists(st.tuples(TEXT, VALIDATORS), max_size=3).map(tuple),
    paused=st.sampled_from([None, "user", "removed", "parent"]),
    paused_at=MAYBE_DOUBLE,
    epoch=LONG,
    last_success=MAYBE_DOUBLE,
    last_error=st.none() | TEXT,
    created=DOUBLE,
)


def fastavro_state(state: PartitionState) -> bytes:
    return framing.encode(SCHEMAS.current[STATE], _state_record(state))


def outcome(write: Any) -> bytes | type[BaseException]:
    try:
        return bytes(write())
    except Exception as exc:
        return type(exc)


def test_the_shipped_partition_state_is_written_by_hand() -> None:
    assert SCHEMAS.current[STATE].canonical == state_binary.PARTITION_STATE_CANONICAL


@settings(max_examples=400)
@given(state=STATES)
def test_states_are_the_bytes_fastavro_writes_and_read_back(state: PartitionState) -> None:
    assert state_binary.partition_state(FORMAT_VERSION, state, _optional_json) is not None
    written = encode_state(state)
    assert written == fastavro_state(state)
    assert encode_state(decode_state(written)) == written


@pytest.mark.parametrize(
    "odd",
    [
        {"sequence": 1.5},
        {"sequence": 2**63},
        {"epoch": True},
        {"created": True},
        {"created": "0"},
        {"last_error": b"bytes"},
        {"paused": "someone"},
        {"validators": [("u", Validators())]},
        {"validators": (("u", Validators(etag=b"x")),)},  # type: ignore[arg-type]
        {"live": LaneState(active=1)},  # type: ignore[arg-type]
        {"live": LaneState(scan=-(2**64))},
        {"circuit": Circuit(probe_in_flight=None)},  # type: ignore[arg-type]
    ],
)
def test_unusual_values_give_what_fastavro_gives(odd: dict[str, Any]) -> None:
    state = replace(
        PartitionState("p", "t1", LaneState(), KeySchedule(1.0, 2.0), created=3.0), **odd
    )
    assert state_binary.partition_state(FORMAT_VERSION, state, _optional_json) is None
    new = outcome(lambda: encode_state(state))
    old = outcome(lambda: fastavro_state(state))
    if isinstance(old, bytes):
        assert new == old
    else:  # fastavro's error, as encode_state always reported it
        assert isinstance(new, type) and issubclass(new, ValueError | TypeError | OverflowError)
