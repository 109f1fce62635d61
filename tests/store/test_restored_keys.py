"""RestoredKeys: the restore keeps the last raw value of each record and decodes a key only
when the store takes it in (watukuy.store.kafka.restore)."""

from __future__ import annotations

import pytest

from watukuy.core.commands import Command
from watukuy.core.errors import NewerRelease, StateCorrupted
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.state import ParkedItem, SnapshotEntry
from watukuy.serde import framing
from watukuy.serde import state as serde
from watukuy.store.kafka import records
from watukuy.store.kafka.catchup_rule import PublishedEvent
from watukuy.store.kafka.restore import RestoredKeys

pytestmark = pytest.mark.unit

POLLER = define_poller(name="p", fetch=lambda ctx: [], identity=lambda item: item["id"])
KEY = "t/1%"  # escaped in record keys, plain in the key's name
NAME = f"p/{KEY}"


def entry(version: str) -> SnapshotEntry:
    return SnapshotEntry(version=version, seen=1.0)


def item(identity: str, version: str) -> tuple[bytes, bytes]:
    return (
        records.item_key("p", KEY, identity),
        records.encode_item("p", KEY, identity, entry(version)),
    )


def parked(parked_id: str) -> tuple[bytes, bytes]:
    value = ParkedItem(parked_id, "p", KEY, "invalid", {"id": 1}, "bad", 1, 1.0)
    return records.parked_key("p", KEY, parked_id), records.encode_parked(value)


def newer(raw: bytes, name: str) -> bytes:
    schema = serde.SCHEMAS.current[name]
    value = framing.decode(raw, schema)
    value["format_version"] = serde.FORMAT_VERSION + 1
    return framing.encode(schema, value)


def test_the_last_value_of_each_record_wins_and_tombstones_remove_it() -> None:
    keys = RestoredKeys()
    state = fresh_state(POLLER, KEY, 1.0)
    keys.apply_state(records.state_key("p", KEY), records.encode_state(state))
    keys.apply_item(*item("a/b", "v1"))
    keys.apply_item(*item("a/b", "v2"))
    keys.apply_item(*item("gone", "v1"))
    keys.apply_item(records.item_key("p", KEY, "gone"), None)
    keys.apply_item(records.item_key("p", KEY, "never"), None)  # a tombstone of nothing
    keys.apply_parked(*parked("x"))
    keys.apply_item(*item("other", "v1"))

    assert keys.names() == [NAME]
    assert keys.state(NAME) == state
    assert keys.record_ids(NAME) == (["a/b", "other"], ["x"])
    snapshot, parked_items = keys.take(NAME)
    assert snapshot == {"a/b": entry("v2"), "other": entry("v1")}
    assert list(parked_items) == ["x"]
    assert keys.take(NAME) == ({}, {})  # taken once: the raw records are let go


def test_a_key_of_another_partition_key_is_kept_apart() -> None:
    keys = RestoredKeys()
    keys.apply_item(*item("a", "v1"))
    other = records.item_key("p", "t", "a"), records.encode_item("p", "t", "a", entry("v9"))
    keys.apply_item(*other)
    assert keys.take("p/t")[0] == {"a": entry("v9")}
    assert keys.take(NAME)[0] == {"a": entry("v1")}


def test_a_state_tombstone_removes_the_key() -> None:
    keys = RestoredKeys()
    key = records.state_key("p", KEY)
    keys.apply_state(key, records.encode_state(fresh_state(POLLER, KEY, 1.0)))
    keys.apply_state(key, None)
    assert keys.names() == []


def test_a_newer_snapshot_entry_raises_when_taken_and_keeps_the_raw_records() -> None:
    keys = RestoredKeys()
    record, value = item("a", "v1")
    keys.apply_item(record, newer(value, serde.ITEM))  # applying does not decode: no error
    with pytest.raises(NewerRelease):
        keys.take(NAME)
    assert keys.record_ids(NAME) == (["a"], [])  # still there, for a removal to tombstone


def test_entries_are_decoded_one_by_one_and_the_raw_records_kept() -> None:
    keys = RestoredKeys()
    keys.apply_state(
        records.state_key("p", KEY), records.encode_state(fresh_state(POLLER, KEY, 1.0))
    )
    keys.apply_item(*item("a/b", "v1"))
    keys.apply_item(*item("a/b", "v2"))
    keys.apply_item(*item("c", "v1"))
    keys.apply_item(records.item_key("p", KEY, "c"), None)
    record, value = item("newer", "v1")
    keys.apply_item(record, newer(value, serde.ITEM))

    assert keys.entries(NAME, ["a/b", "c", "never"]) == {"a/b": entry("v2")}
    assert keys.entries("p/t", ["a/b"]) == {}  # another key's records are not its
    with pytest.raises(NewerRelease):  # only the records asked for are decoded
        keys.entries(NAME, ["a/b", "newer"])
    assert keys.record_ids(NAME) == (["a/b", "newer"], [])  # nothing was let go


def test_entries_of_a_key_to_be_rolled_forward_are_left_to_take() -> None:
    keys = RestoredKeys()
    key = records.state_key("p", KEY)
    keys.apply_state(key, records.encode_state(fresh_state(POLLER, KEY, 1.0)))
    keys.apply_item(*item("a", "v1"))
    # The key published sequence 1 beyond its stored state (0): its snapshot rolls forward.
    keys.published[key] = [PublishedEvent("a", "updated", "v2", 1, 2.0)]
    assert keys.state(NAME).sequence == 1
    assert keys.entries(NAME, ["a"]) is None  # only the whole snapshot, taken, is right
    assert keys.take(NAME)[0]["a"].version == "v2"


def test_commands_are_decoded_as_they_come_and_a_newer_one_is_left_alone() -> None:
    keys = RestoredKeys()
    first = Command("c1", "pause", "p", KEY, issued_at=2.0)
    second = Command("c2", "resume", "p", KEY, issued_at=1.0)
    for command in (first, second):
        key = records.command_key(command.poller, command.partition, command.id)
        keys.apply_state(key, records.encode_command(command))
    later = Command("c3", "trigger", "p", KEY, issued_at=3.0)
    keys.apply_state(
        records.command_key("p", KEY, later.id), newer(records.encode_command(later), serde.COMMAND)
    )
    # applied by its owner meanwhile
    keys.apply_state(records.command_key("p", KEY, first.id), None)
    assert [c.id for c in keys.pending_commands()] == ["c2"]
    assert keys.names() == []  # commands are not keys


def test_record_keys_keep_their_wire_layout_for_a_child_partition() -> None:
    """The layout written before the key type existed, byte for byte: a partition holding
    ``/`` (a child stream's ``tenant/parent``) is escaped after the poller's name."""
    assert records.state_key("p", "t/parent") == b"p/t/parent"
    assert records.item_key("p", "t/parent", "a/%") == b"p/t%2Fparent/a%2F%25"
    assert records.parked_key("p", "t/parent", "x") == b"p/t%2Fparent/x"
    assert records.command_key("p", "t/parent", "c1") == b"cmd/p/t%2Fparent/c1"
    item = records.item_key("p", "t/parent", "a/%")
    assert records.owner_of(item) == b"p/t%2Fparent"
    assert records.last_segment(item) == "a/%"
    with pytest.raises(StateCorrupted):
        records.last_segment(b"p/t/parent/a")  # an unescaped partition: not this layout


class Fetched:
    """A record as the Kafka thread's consumer gives it."""

    def __init__(self, key: bytes | None, value: bytes | None, stamp: int = 0) -> None:
        self._key, self._value, self._stamp = key, value, stamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, self._stamp)


def test_records_read_in_runs_leave_what_records_applied_one_by_one_leave() -> None:
    other = "t/2"
    states = [
        (records.state_key("p", KEY), records.encode_state(fresh_state(POLLER, KEY, 1.0)), 7),
        (records.state_key("p", other), records.encode_state(fresh_state(POLLER, other, 1.0)), 8),
        (records.state_key("p", other), None, 9),
    ]
    items = [
        item("a", "v1"),
        item("b", "v1"),
        (records.item_key("p", other, "x"), b"x1"),
        item("a", "v2"),
        (records.item_key("p", KEY, "b"), None),
        (records.item_key("p", KEY, "never"), None),  # a tombstone of nothing
        (records.item_key("p", "t/3", "gone"), None),  # of an owner never seen
        (records.item_key("p", other, "y"), b"y1"),
        (None, b"no key: left out"),
    ]
    parked_records = [parked("x"), parked("y"), (records.parked_key("p", KEY, "y"), None)]
    one_by_one, in_runs = RestoredKeys(), RestoredKeys()
    for key, value, stamp in states:
        one_by_one.apply_state(key, value, stamp)
    for key, value in items:
        if key is not None:
            one_by_one.apply_item(key, value)
    for key, value in parked_records:
        one_by_one.apply_parked(key, value)
    in_runs.states_read([Fetched(key, value, stamp) for key, value, stamp in states])
    in_runs.items_read([Fetched(key, value) for key, value in items])
    in_runs.parked_read([Fetched(key, value) for key, value in parked_records])
    assert in_runs.states == one_by_one.states and in_runs.stamps == one_by_one.stamps
    assert in_runs.items == one_by_one.items and in_runs.parked == one_by_one.parked
    snapshot, parked_items = in_runs.take(NAME)
    assert snapshot == {"a": entry("v2")} and list(parked_items) == ["x"]
