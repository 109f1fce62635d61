from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from typing import Any

import pytest
from fastavro.utils import generate_many
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.commands import Command
from watukuy.core.errors import NewerRelease, StateCorrupted
from watukuy.core.operations import KEY_OPERATIONS
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.schedule import KeySchedule
from watukuy.core.state import LaneState, ParkedItem, PartitionState, SnapshotEntry, Validators
from watukuy.serde import framing
from watukuy.serde import state as serde

pytestmark = pytest.mark.unit

NOW = 1_750_000_000.0
SCHEMA_DIR = resources.files("watukuy.serde").joinpath("schemas", "state")

# -- strategies ------------------------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
COUNT = st.integers(min_value=0, max_value=2**63 - 1)
FLOATS = st.floats(allow_nan=False)  # NaN != NaN: exactness is checked with ==
TEXT = st.text(max_size=20)
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | FLOATS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)

LANES = st.builds(
    LaneState, cursor=JSON, active=st.booleans(), replaying=st.booleans(), scan=COUNT, until=JSON
)
SCHEDULES = st.builds(KeySchedule, interval=FLOATS, next_due=FLOATS, throttle_until=FLOATS)
CIRCUITS = st.builds(
    Circuit,
    state=st.sampled_from(CircuitState),
    consecutive_failures=COUNT,
    opened_at=st.none() | FLOATS,
    cooldown=FLOATS,
    probe_in_flight=st.booleans(),
)
VALIDATORS = st.lists(
    st.tuples(
        TEXT,
        st.builds(Validators, etag=st.none() | TEXT, last_modified=st.none() | TEXT),
    ),
    max_size=4,
    unique_by=lambda pair: pair[0],  # one entry per URL, as with_validators builds them
).map(tuple)  # but in any order: the encoding keeps it
STATES = st.builds(
    PartitionState,
    poller=TEXT,
    partition=TEXT,
    live=LANES,
    schedule=SCHEDULES,
    backfill=LANES,
    reconcile=LANES,
    reconcile_due=st.none() | FLOATS,
    circuit=CIRCUITS,
    sequence=INT64,
    validators=VALIDATORS,
    paused=st.sampled_from([None, "user", "removed", "parent"]),
    epoch=INT64,
    last_success=st.none() | FLOATS,
    last_error=st.none() | TEXT,
    created=FLOATS,
)
ENTRIES = st.builds(
    SnapshotEntry, version=TEXT, seen=FLOATS, scan=COUNT, deleted=st.none() | FLOATS
)
PARKED = st.builds(
    ParkedItem,
    id=TEXT,
    poller=TEXT,
    partition=TEXT,
    kind=st.sampled_from(["invalid", "poison"]),
    item=JSON,
    error=TEXT,
    attempts=INT64,
    parked_at=FLOATS,
    lane=st.sampled_from(["live", "backfill", "reconcile"]),
    subject=st.none() | TEXT,
    event=st.none() | st.dictionaries(TEXT, JSON, max_size=4),
)
COMMANDS = st.builds(
    Command,
    id=TEXT,
    op=st.sampled_from(sorted(KEY_OPERATIONS)),
    poller=TEXT,
    partition=TEXT,
    args=st.dictionaries(TEXT, JSON, max_size=4),
    issued_at=FLOATS,
)


def typical_state() -> PartitionState:
    poller = define_poller(
        name="invoices",
        fetch=lambda ctx: None,
        identity=lambda i: i["id"],
        version=lambda i: i["v"],
        schedule={"min": "30s", "max": "15m"},
        reconcile="1h",
    )
    state = fresh_state(poller, "tenant/42", NOW - 3600, epoch=7)
    return replace(
        state,
        live=LaneState(cursor={"updated_since": "2026-01-01T00:10:00Z", "page": "abc"}),
        backfill=LaneState(cursor=1200, active=True, until="2026-01-01T00:00:00Z"),
        reconcile=LaneState(cursor=None, active=True, scan=3),
        schedule=KeySchedule(interval=117.0, next_due=NOW + 117.0, throttle_until=NOW + 5),
        circuit=Circuit(
            state=CircuitState.HALF_OPEN,
            consecutive_failures=6,
            opened_at=NOW - 30,
            cooldown=60.0,
            probe_in_flight=True,
        ),
        sequence=12345,
        validators=(
            ("https://api.example.com/b", Validators(etag='W/"2"')),
            ("https://api.example.com/a", Validators(last_modified="Wed, 01 Jan 2026")),
        ),
        paused="user",
        last_success=NOW - 60,
        last_error="HTTP 503 from https://api.example.com/a",
    )


# -- round trips -----------------------------------------------------------------------------


def test_typical_state_round_trips() -> None:
    state = typical_state()
    raw = serde.encode_state(state)
    assert serde.decode_state(raw) == state
    assert serde.decode_state(raw).circuit.state is CircuitState.HALF_OPEN


def test_default_state_round_trips() -> None:
    state = PartitionState("p", "", LaneState(), KeySchedule(interval=30.0, next_due=NOW))
    assert serde.decode_state(serde.encode_state(state)) == state


@settings(max_examples=200)
@given(STATES)
def test_any_state_round_trips(state: PartitionState) -> None:
    decoded = serde.decode_state(serde.encode_state(state))
    assert decoded == state
    assert decoded.validators == state.validators  # order included


@given(TEXT, TEXT, TEXT, ENTRIES)
def test_any_snapshot_entry_round_trips(
    poller: str, partition: str, identity: str, entry: SnapshotEntry
) -> None:
    raw = serde.encode_item(poller, partition, identity, entry)
    assert serde.decode_item(raw) == (f"{poller}/{partition}", identity, entry)


LONG_TEXT = st.text(max_size=300)  # lengths past 63 bytes take more than one varint byte


@settings(max_examples=300)
@given(LONG_TEXT, LONG_TEXT, LONG_TEXT, ENTRIES)
def test_snapshot_entries_are_read_by_hand_exactly_as_fastavro_reads_them(
    poller: str, partition: str, identity: str, entry: SnapshotEntry
) -> None:
    raw = serde.encode_item(poller, partition, identity, entry)
    reference = framing.decode(raw, serde.SCHEMAS.current[serde.ITEM])
    owner, decoded_identity, decoded = serde.decode_item(raw)
    assert (owner, decoded_identity) == (f"{poller}/{partition}", identity)
    assert decoded == SnapshotEntry(
        reference["version"], reference["seen"], reference["scan"], reference["deleted"]
    )


def test_the_hand_reader_is_on_for_the_shipped_snapshot_schema() -> None:
    # If the schema changes, serde.state's reader must change with it (or stay off).
    assert serde._ITEM_BY_HAND


def test_an_unusual_snapshot_entry_is_left_to_fastavro() -> None:
    raw = serde.encode_item("p", "k", "i", SnapshotEntry("v", NOW, 3, NOW + 1))
    # Trailing bytes: fastavro reads the record and ignores them, so the result is the same.
    assert serde.decode_item(raw + b"\x00") == serde.decode_item(raw)
    for cut in (11, 15, len(raw) - 1):
        with pytest.raises(StateCorrupted):
            serde.decode_item(raw[:cut])


@given(PARKED)
def test_any_parked_item_round_trips(item: ParkedItem) -> None:
    assert serde.decode_parked(serde.encode_parked(item)) == item


@given(COMMANDS)
def test_any_command_round_trips(command: Command) -> None:
    assert serde.decode_command(serde.encode_command(command)) == command


def command_op_enum(schema: framing.Schema) -> dict[str, Any]:
    (op,) = [f["type"] for f in schema.parsed["fields"] if f["name"] == "op"]
    assert op["type"] == "enum" and op["name"].endswith("CommandOp")
    return op


def test_the_command_op_enum_is_the_registrys_per_key_operations() -> None:
    """A key operation added to watukuy.core.operations needs its symbol in command.avsc."""
    op = command_op_enum(serde.SCHEMAS.current[serde.COMMAND])
    assert sorted(op["symbols"]) == sorted(KEY_OPERATIONS)
    assert op["default"] in KEY_OPERATIONS  # what a reader makes of a symbol it lacks


def test_a_v0_command_is_read_with_the_current_schema() -> None:
    """v0's CommandOp had no retry and no alter_offsets: its commands still decode."""
    v0 = history_schema("command.v0.avsc")
    assert v0.fingerprint != serde.SCHEMAS.current[serde.COMMAND].fingerprint
    assert set(command_op_enum(v0)["symbols"]) < set(KEY_OPERATIONS)
    old = {
        "format_version": 1,
        "id": "c1",
        "op": "replay",
        "poller": "invoices",
        "partition": "t/42",
        "args": '{"from_":"2026-09-01T00:00:00Z"}',
        "issued_at": NOW,
    }
    decoded = serde.decode_command(framing.encode(v0, old))
    assert decoded == Command(
        "c1", "replay", "invoices", "t/42", {"from_": "2026-09-01T00:00:00Z"}, NOW
    )
    # ... and the registry reads the argument name that release wrote.
    assert KEY_OPERATIONS["replay"].decode(decoded.args) == {"from_": "2026-09-01T00:00:00Z"}


def test_encoding_what_the_schema_refuses_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="cannot encode command 'explode'"):
        serde.encode_command(Command("c1", "explode", "p", "k"))
    with pytest.raises(ValueError, match="PartitionState"):
        serde.encode_state(replace(typical_state(), paused="bogus"))  # type: ignore[arg-type]


# -- framing ---------------------------------------------------------------------------------


def encoded() -> dict[str, bytes]:
    return {
        serde.STATE: serde.encode_state(typical_state()),
        serde.ITEM: serde.encode_item("p", "k", "i", SnapshotEntry("v1", NOW)),
        serde.PARKED: serde.encode_parked(
            ParkedItem("x", "p", "k", "invalid", {"id": 1}, "bad", 1, NOW)
        ),
        serde.COMMAND: serde.encode_command(Command("c", "pause", "p", "k")),
    }


@pytest.mark.parametrize("name", [serde.STATE, serde.ITEM, serde.PARKED, serde.COMMAND])
def test_values_are_single_object_encoded_with_the_current_schema(name: str) -> None:
    raw = encoded()[name]
    assert raw[:2] == b"\xc3\x01"
    assert framing.fingerprint_of(raw) == serde.SCHEMAS.current[name].fingerprint
    assert framing.decode(raw, serde.SCHEMAS.current[name])["format_version"] == 1


def test_each_value_has_its_own_schema_and_a_format_version() -> None:
    current = serde.SCHEMAS.current
    assert set(current) == {serde.STATE, serde.ITEM, serde.PARKED, serde.COMMAND}
    assert len({s.fingerprint for s in current.values()}) == 4
    for schema in current.values():
        fields = {f["name"]: f for f in schema.parsed["fields"]}
        assert fields["format_version"]["type"] == "int"
        assert fields["format_version"]["default"] == 1


def test_optional_fields_default_to_null() -> None:
    """So a later release can add fields with defaults and still read these values."""
    for schema in serde.SCHEMAS.current.values():
        for field in schema.parsed["fields"]:
            if isinstance(field["type"], list):
                assert field["type"][0] == "null" and field["default"] is None, field["name"]


# -- errors ----------------------------------------------------------------------------------


def test_unknown_fingerprint_is_state_corrupted_without_the_value() -> None:
    state = replace(typical_state(), last_error="s3cr3t-token")
    raw = serde.encode_state(state)
    forged = raw[:2] + b"\x00" * 8 + raw[10:]
    with pytest.raises(
        StateCorrupted, match="no known schema has fingerprint 0000000000000000"
    ) as e:
        serde.decode_state(forged)
    assert "s3cr3t" not in str(e.value)
    assert "tenant" not in str(e.value)


def test_a_value_of_another_kind_is_state_corrupted() -> None:
    values = encoded()
    with pytest.raises(StateCorrupted, match="PartitionState"):
        serde.decode_state(values[serde.ITEM])
    with pytest.raises(StateCorrupted, match="Command"):
        serde.decode_command(values[serde.STATE])
    with pytest.raises(StateCorrupted, match="SnapshotEntry"):
        serde.decode_item(values[serde.PARKED])
    with pytest.raises(StateCorrupted, match="ParkedItem"):
        serde.decode_parked(values[serde.COMMAND])


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xc3\x01",
        b'{"poller": "p"}',  # the JSON encoding of before
        json.dumps(typical_state().to_dict()).encode(),
    ],
)
def test_not_single_object_is_state_corrupted(raw: bytes) -> None:
    with pytest.raises(StateCorrupted, match="single-object"):
        serde.decode_state(raw)


def test_truncated_body_is_state_corrupted() -> None:
    raw = serde.encode_state(typical_state())
    with pytest.raises(StateCorrupted, match="unreadable Avro value"):
        serde.decode_state(raw[:-20])


def test_bad_embedded_json_is_state_corrupted() -> None:
    value = framing.decode(serde.encode_state(typical_state()), serde.SCHEMAS.current[serde.STATE])
    value["live"]["cursor"] = "{not json"
    raw = framing.encode(serde.SCHEMAS.current[serde.STATE], value)
    with pytest.raises(StateCorrupted, match="unreadable PartitionState record: JSONDecodeError"):
        serde.decode_state(raw)


def test_command_args_must_be_an_object() -> None:
    schema = serde.SCHEMAS.current[serde.COMMAND]
    value = framing.decode(serde.encode_command(Command("c", "pause", "p", "k")), schema)
    value["args"] = "[1, 2]"
    with pytest.raises(StateCorrupted, match="not a JSON object"):
        serde.decode_command(framing.encode(schema, value))


def test_a_newer_format_version_is_refused() -> None:
    schema = serde.SCHEMAS.current[serde.STATE]
    value = framing.decode(serde.encode_state(typical_state()), schema)
    value["format_version"] = serde.FORMAT_VERSION + 1
    with pytest.raises(StateCorrupted, match="newer release"):
        serde.decode_state(framing.encode(schema, value))


@pytest.mark.parametrize("name", [serde.STATE, serde.ITEM, serde.PARKED, serde.COMMAND])
def test_a_value_from_a_newer_release_is_told_apart_from_corruption(name: str) -> None:
    """A rolling upgrade: an older reader meets a newer value. ``NewerRelease`` lets the
    store make the key wait instead of failing; real corruption stays ``StateCorrupted``."""
    decode = {
        serde.STATE: serde.decode_state,
        serde.ITEM: serde.decode_item,
        serde.PARKED: serde.decode_parked,
        serde.COMMAND: serde.decode_command,
    }[name]
    raw = encoded()[name]
    schema = serde.SCHEMAS.current[name]
    value = framing.decode(raw, schema)
    value["format_version"] = serde.FORMAT_VERSION + 1
    newer = framing.encode(schema, value)
    with pytest.raises(NewerRelease, match=f"format_version {serde.FORMAT_VERSION + 1} is newer"):
        decode(newer)
    # A later release that changed the schema: a fingerprint this release has never seen.
    with pytest.raises(NewerRelease, match="no known schema has fingerprint"):
        decode(raw[:2] + b"\x01" * 8 + raw[10:])
    # Not newer, just wrong: another kind of value, or a broken body.
    other = serde.ITEM if name != serde.ITEM else serde.STATE
    for broken in (encoded()[other], raw[:-3], b"not avro"):
        with pytest.raises(StateCorrupted) as caught:
            decode(broken)
        assert not isinstance(caught.value, NewerRelease), broken
    assert decode(raw) is not None  # the value as this release wrote it still reads


# -- evolution -------------------------------------------------------------------------------


def history_schema(filename: str) -> framing.Schema:
    text = SCHEMA_DIR.joinpath("history", filename).read_text(encoding="utf-8")
    return framing.Schema.of(text)


def test_a_v0_state_is_read_with_the_current_schema() -> None:
    """v0 had no ``last_error``, no ``created`` and no ``schedule.throttle_until``."""
    v0 = history_schema("partition_state.v0.avsc")
    assert v0.fingerprint != serde.SCHEMAS.current[serde.STATE].fingerprint
    assert v0.fingerprint in serde.SCHEMAS.writers[serde.STATE]
    lane = {"cursor": None, "active": False, "replaying": False, "scan": 0, "until": None}
    old = {
        "format_version": 0,
        "poller": "invoices",
        "partition": "tenant/42",
        "live": {**lane, "cursor": json.dumps({"page": 3})},
        "schedule": {"interval": 60.0, "next_due": NOW},
        "backfill": {**lane, "active": True, "until": '"2026-01-01"'},
        "reconcile": {**lane, "scan": 2},
        "reconcile_due": NOW + 3600,
        "circuit": {
            "state": "OPEN",
            "consecutive_failures": 5,
            "opened_at": NOW - 10,
            "cooldown": 30.0,
            "probe_in_flight": False,
        },
        "sequence": 41,
        "validators": [{"url": "https://x/a", "etag": '"e1"', "last_modified": None}],
        "paused": "removed",
        "epoch": 3,
        "last_success": NOW - 100,
    }
    raw = framing.encode(v0, old)
    assert framing.fingerprint_of(raw) == v0.fingerprint

    assert serde.decode_state(raw) == PartitionState(
        poller="invoices",
        partition="tenant/42",
        live=LaneState(cursor={"page": 3}),
        schedule=KeySchedule(interval=60.0, next_due=NOW, throttle_until=0.0),
        backfill=LaneState(active=True, until="2026-01-01"),
        reconcile=LaneState(scan=2),
        reconcile_due=NOW + 3600,
        circuit=Circuit(CircuitState.OPEN, 5, NOW - 10, 30.0, False),
        sequence=41,
        validators=(("https://x/a", Validators(etag='"e1"')),),
        paused="removed",
        epoch=3,
        last_success=NOW - 100,
        last_error=None,  # filled from the current schema's defaults
        created=0.0,
    )


def test_every_history_schema_resolves_to_the_current_one() -> None:
    """A schema change that breaks resolution (a field added without default) fails here."""
    checked = 0
    for name, writers in serde.SCHEMAS.writers.items():
        current = serde.SCHEMAS.current[name]
        for writer in writers.values():
            for value in generate_many(writer.parsed, 20):
                framing.decode(framing.encode(writer, value), writer, current)
            checked += 1
    assert checked > len(serde.SCHEMAS.current)  # there is history to check


def test_history_schemas_are_loaded_by_name() -> None:
    names = [e.name for e in SCHEMA_DIR.joinpath("history").iterdir() if e.name.endswith(".avsc")]
    assert names
    for filename in names:
        schema = history_schema(filename)
        assert any(schema.fingerprint in w for w in serde.SCHEMAS.writers.values()), filename
