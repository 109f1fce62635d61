"""A key's state caught up with the events it had already published
(watukuy.store.kafka.catchup_rule), and the restored keys that roll forward over them
(watukuy.store.kafka.restore)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from watukuy.core.changes import detect
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.state import SnapshotEntry
from watukuy.store.kafka import records
from watukuy.store.kafka.catchup_rule import PublishedEvent, missed, roll_forward
from watukuy.store.kafka.restore import RestoredKeys

pytestmark = pytest.mark.unit

POLLER = define_poller(
    name="p", fetch=lambda ctx: [], identity=lambda item: item["id"], version=lambda i: i["v"]
)


def published(sequence: int, subject: str, version: str, kind: str = "updated") -> PublishedEvent:
    return PublishedEvent(subject, kind, version, sequence, 100.0 + sequence)  # type: ignore[arg-type]


def test_only_the_run_that_continues_the_stored_sequence_is_missed() -> None:
    events = [published(n, f"i{n}", "v1") for n in (3, 4, 5, 6, 8)]
    assert [e.sequence for e in missed(3, events)] == [4, 5, 6]  # 3: accounted for; 8: a gap
    assert missed(6, events) == []  # 7 is not there: 8 continues nothing
    assert missed(8, events) == []


def test_events_of_an_earlier_life_of_the_key_are_not_missed() -> None:
    # Removed and added again: the new life numbers from 1 again, after the old life's events.
    old = [published(n, f"old{n}", "v1") for n in (1, 2, 3, 4)]
    new = [published(n, f"new{n}", "v1") for n in (1, 2)]
    assert missed(2, old + new) == []
    assert missed(1, old + new) == [published(2, "new2", "v1")]
    assert missed(2, [published(n, "i", "v1") for n in (41, 42, 43)]) == []


def test_the_snapshot_takes_each_published_version_and_deletion() -> None:
    snapshot = {
        "a": SnapshotEntry("v1", 10.0, scan=2),
        "gone": SnapshotEntry("v3", 20.0, scan=2),
    }
    events = [
        published(5, "a", "v2"),
        published(6, "new", "v1", "created"),
        published(7, "gone", "v3", "deleted"),
        published(8, "a", "v3"),
    ]
    rolled = roll_forward(snapshot, events)
    assert rolled == {
        "a": SnapshotEntry("v3", 108.0, scan=2),
        "new": SnapshotEntry("v1", 106.0, scan=0),
        "gone": SnapshotEntry("v3", 20.0, scan=2, deleted=107.0),
    }
    assert snapshot["a"].version == "v1"  # the given snapshot is left as it was


def test_after_the_roll_forward_a_poll_of_the_same_items_publishes_nothing_again() -> None:
    items = [{"id": "a", "v": "2"}, {"id": "b", "v": "1"}]
    before = {"a": SnapshotEntry("1", 10.0)}
    first = detect(POLLER, "t", items, before, lane="live", sequence=4, now=50.0)
    assert [(e.subject, e.sequence) for e in first.events] == [("a", 5), ("b", 6)]
    # That commit's events were published; its state and snapshot records were lost.
    heads = [
        PublishedEvent(e.subject, e.type, e.version, e.sequence, e.time.timestamp())
        for e in first.events
    ]
    beyond = missed(4, heads)
    again = detect(
        POLLER, "t", items, roll_forward(before, beyond), lane="live", sequence=6, now=60.0
    )
    assert again.events == []
    changed = [{"id": "a", "v": "3"}]
    later = detect(
        POLLER, "t", changed, roll_forward(before, beyond), lane="live", sequence=6, now=70.0
    )
    assert [(e.subject, e.version, e.sequence) for e in later.events] == [("a", "3", 7)]


def test_restored_keys_roll_the_state_and_then_the_snapshot_forward() -> None:
    name = "p/t"
    state = replace(fresh_state(POLLER, "t", 1.0), sequence=4)
    keys = RestoredKeys()
    keys.apply_state(name.encode(), records.encode_state(state), timestamp=1_000)
    keys.apply_item(
        records.item_key("p", "t", "a"), records.encode_item("p", "t", "a", SnapshotEntry("1", 1.0))
    )
    keys.published[name.encode()] = [published(4, "a", "1"), published(5, "a", "2")]

    assert keys.state(name).sequence == 5
    assert keys.missed(name) == [published(5, "a", "2")]
    snapshot, _ = keys.take(name)
    assert snapshot == {"a": SnapshotEntry("2", 105.0)}
    assert keys.missed(name) == []  # taken in: rolled once


def test_a_state_that_accounts_for_its_events_is_left_as_it_was() -> None:
    name = "p/t"
    state = replace(fresh_state(POLLER, "t", 1.0), sequence=5)
    keys = RestoredKeys()
    keys.apply_state(name.encode(), records.encode_state(state), timestamp=1_000)
    keys.published[name.encode()] = [published(4, "a", "1"), published(5, "a", "2")]
    assert keys.state(name) == state
    assert keys.missed(name) == []
    assert keys.take(name) == ({}, {})
