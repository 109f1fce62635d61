"""The partition state record (schemas/state/partition_state.avsc) encoded by hand, byte for
byte what fastavro writes; the encoding's rules and why are in :mod:`watukuy.serde.binary`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.state import LaneState, PartitionState
from watukuy.serde.binary import encode_double, encode_int, encode_long, text

__all__ = ["PARTITION_STATE_CANONICAL", "partition_state"]

# -- the partition state (schemas/state/partition_state.avsc) -----------------------------------
#
# Written with every page a key commits: fastavro took 80 µs for one (its nested records, ten
# unions and an array each walked field by field), the largest single cost of a key's first
# poll when 10,000 keys start at once (issue 42). By hand: the same bytes in about a tenth.

PARTITION_STATE_CANONICAL = (
    '{"name":"watukuy.state.PartitionState","type":"record","fields":['
    '{"name":"format_version","type":"int"},{"name":"poller","type":"string"},'
    '{"name":"partition","type":"string"},{"name":"live","type":{"name":"watukuy.state.LaneState",'
    '"type":"record","fields":[{"name":"cursor","type":["null","string"]},'
    '{"name":"active","type":"boolean"},{"name":"replaying","type":"boolean"},'
    '{"name":"scan","type":"long"},{"name":"until","type":["null","string"]}]}},'
    '{"name":"schedule","type":{"name":"watukuy.state.KeySchedule","type":"record","fields":['
    '{"name":"interval","type":"double"},{"name":"next_due","type":"double"},'
    '{"name":"throttle_until","type":"double"}]}},'
    '{"name":"backfill","type":"watukuy.state.LaneState"},'
    '{"name":"reconcile","type":"watukuy.state.LaneState"},'
    '{"name":"reconcile_due","type":["null","double"]},'
    '{"name":"circuit","type":{"name":"watukuy.state.Circuit","type":"record","fields":['
    '{"name":"state","type":{"name":"watukuy.state.CircuitState","type":"enum",'
    '"symbols":["CLOSED","OPEN","HALF_OPEN"]}},{"name":"consecutive_failures","type":"long"},'
    '{"name":"opened_at","type":["null","double"]},{"name":"cooldown","type":"double"},'
    '{"name":"probe_in_flight","type":"boolean"}]}},{"name":"sequence","type":"long"},'
    '{"name":"validators","type":{"type":"array","items":{"name":"watukuy.state.UrlValidators",'
    '"type":"record","fields":[{"name":"url","type":"string"},'
    '{"name":"etag","type":["null","string"]},{"name":"last_modified","type":["null","string"]}]'
    '}}},{"name":"paused","type":["null",{"name":"watukuy.state.PauseReason","type":"enum",'
    '"symbols":["user","removed","parent"]}]},{"name":"paused_at","type":["null","double"]},'
    '{"name":"epoch","type":"long"},{"name":"last_success","type":["null","double"]},'
    '{"name":"last_error","type":["null","string"]},{"name":"created","type":"double"}]}'
)

_PAUSE_REASONS = {"user": b"\x02\x00", "removed": b"\x02\x02", "parent": b"\x02\x04"}
_NULL = b"\x00"


def _flag(value: Any) -> bytes | None:
    return b"\x01" if value is True else b"\x00" if value is False else None


def _maybe_double(value: Any) -> bytes | None:
    if value is None:
        return _NULL
    written = encode_double(value)
    return None if written is None else b"\x02" + written


def _maybe_text(value: Any) -> bytes | None:
    if value is None:
        return _NULL
    written = text(value)
    return None if written is None else b"\x02" + written


def _lane(lane: LaneState, json_of: Callable[[Any], str | None]) -> list[bytes | None]:
    return [
        _maybe_text(json_of(lane.cursor)),
        _flag(lane.active),
        _flag(lane.replaying),
        encode_long(lane.scan),
        _maybe_text(json_of(lane.until)),
    ]


def _circuit(circuit: Circuit) -> list[bytes | None]:
    state = circuit.state  # compared by identity: hashing an Enum member runs Python code
    symbol = (
        b"\x00"
        if state is CircuitState.CLOSED
        else b"\x02"
        if state is CircuitState.OPEN
        else b"\x04"
        if state is CircuitState.HALF_OPEN
        else None
    )
    return [
        symbol,
        encode_long(circuit.consecutive_failures),
        _maybe_double(circuit.opened_at),
        encode_double(circuit.cooldown),
        _flag(circuit.probe_in_flight),
    ]


def _validators(validators: Any) -> bytes | None:
    if type(validators) is not tuple:
        return None
    if not validators:
        return _NULL
    out = [encode_long(len(validators))]
    for url, found in validators:
        out += (text(url), _maybe_text(found.etag), _maybe_text(found.last_modified))
    out.append(_NULL)
    return None if None in out else b"".join(out)  # type: ignore[arg-type]


def partition_state(
    format_version: int, state: PartitionState, json_of: Callable[[Any], str | None]
) -> bytes | None:
    """The body of ``state``'s record; ``json_of`` writes a cursor or an ``until`` (``None``
    stays ``null``), and what it raises goes through, as on fastavro's path."""
    schedule = state.schedule
    fields = [
        encode_int(format_version),
        text(state.poller),
        text(state.partition),
        *_lane(state.live, json_of),
        encode_double(schedule.interval),
        encode_double(schedule.next_due),
        encode_double(schedule.throttle_until),
        *_lane(state.backfill, json_of),
        *_lane(state.reconcile, json_of),
        _maybe_double(state.reconcile_due),
        *_circuit(state.circuit),
        encode_long(state.sequence),
        _validators(state.validators),
        _NULL if state.paused is None else _PAUSE_REASONS.get(state.paused),
        _maybe_double(state.paused_at),
        encode_long(state.epoch),
        _maybe_double(state.last_success),
        _maybe_text(state.last_error),
        encode_double(state.created),
    ]
    if None in fields:
        return None
    return b"".join(fields)  # type: ignore[arg-type]
