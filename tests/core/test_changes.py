from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.changes import Detected, deletions, detect, expired, identify
from watukuy.core.events import event_id, fingerprint
from watukuy.core.poller import Poller, define_poller
from watukuy.core.state import SnapshotEntry

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0


def make(**overrides: Any) -> Poller:
    fields: dict[str, Any] = {
        "name": "invoices",
        "fetch": lambda ctx: None,
        "identity": lambda i: i["id"],
        "version": lambda i: i["v"],
    }
    fields.update(overrides)
    return define_poller(**fields)


POLLER = make()


def run(
    items: list[Any],
    snapshot: dict[str, SnapshotEntry] | None = None,
    *,
    poller: Poller = POLLER,
    partition: str = "t_1",
    sequence: int = 0,
    **kwargs: Any,
) -> Detected:
    return detect(
        poller,
        partition,
        items,
        snapshot or {},
        lane=kwargs.pop("lane", "live"),
        sequence=sequence,
        now=kwargs.pop("now", NOW),
        **kwargs,
    )


def entry(version: str, scan: int = 0, deleted: float | None = None) -> SnapshotEntry:
    return SnapshotEntry(version=version, seen=NOW - 100, scan=scan, deleted=deleted)


# events: ids and fingerprints


def test_event_id_is_stable() -> None:
    assert event_id("p", "t_1", "a", "v1") == event_id("p", "t_1", "a", "v1")


@pytest.mark.parametrize(
    "other",
    [
        ("q", "t_1", "a", "v1"),
        ("p", "t_2", "a", "v1"),
        ("p", "", "a", "v1"),
        ("p", "t_1", "b", "v1"),
        ("p", "t_1", "a", "v2"),
    ],
)
def test_event_id_differs_when_any_part_differs(other: tuple[str, str, str, str]) -> None:
    assert event_id(*other) != event_id("p", "t_1", "a", "v1")


def test_deleted_id_differs_from_the_version_id() -> None:
    assert event_id("p", "t_1", "a", "v1", "deleted") != event_id("p", "t_1", "a", "v1")


def test_fingerprint_ignores_key_order() -> None:
    a = {"id": 1, "total": 10, "lines": [{"sku": "x", "qty": 1}]}
    b = {"lines": [{"qty": 1, "sku": "x"}], "total": 10, "id": 1}
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint({**a, "total": 11})
    assert fingerprint({"lines": [1, 2]}) != fingerprint({"lines": [2, 1]})


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=8))
def test_fingerprint_independent_of_insertion_order(item: dict[str, Any]) -> None:
    reordered = dict(reversed(list(item.items())))
    assert fingerprint(item) == fingerprint(reordered)


def test_event_shape() -> None:
    out = run([{"id": "a", "v": "1", "total": 5}], sequence=41, lane="backfill")
    (event,) = out.events
    assert event.poller == "invoices"
    assert event.partition == "t_1"
    assert event.subject == "a"
    assert event.type == "created"
    assert event.version == "1"
    assert event.sequence == 42
    assert event.time == datetime.fromtimestamp(NOW, tz=UTC)
    assert event.lane == "backfill"
    assert event.schema_version == 1
    assert event.data == {"id": "a", "v": "1", "total": 5}
    assert event.id == event_id("invoices", "t_1", "a", "1")
    assert event.key == "invoices/t_1"
    as_dict = event.to_dict()
    assert as_dict["time"].endswith("Z")
    assert json.loads(json.dumps(as_dict))["subject"] == "a"


# detect


def test_new_item_is_created_and_recorded() -> None:
    out = run([{"id": "a", "v": "1"}])
    assert [(e.type, e.subject) for e in out.events] == [("created", "a")]
    assert out.upserts == {"a": SnapshotEntry(version="1", seen=NOW, scan=0)}
    assert out.parked == []
    assert out.sequence == 1


def test_other_version_is_updated() -> None:
    out = run([{"id": "a", "v": "2"}], {"a": entry("1")})
    assert [(e.type, e.version) for e in out.events] == [("updated", "2")]
    assert out.upserts["a"].version == "2"


def test_same_version_is_nothing() -> None:
    out = run([{"id": "a", "v": "1"}], {"a": entry("1")}, sequence=7)
    assert out.events == []
    assert out.upserts == {}
    assert out.sequence == 7


def test_integer_identity_and_version_become_text() -> None:
    out = run([{"id": 7, "v": 3}])
    assert (out.events[0].subject, out.events[0].version) == ("7", "3")


def test_without_version_the_fingerprint_is_the_version() -> None:
    poller = make(version=None)
    item = {"id": "a", "x": 1}
    first = run([item], poller=poller)
    assert first.events[0].version == fingerprint(item)
    assert run([{"x": 1, "id": "a"}], first.upserts, poller=poller).events == []
    changed = run([{"id": "a", "x": 2}], first.upserts, poller=poller)
    assert [e.type for e in changed.events] == ["updated"]


def test_custom_fingerprint_is_used() -> None:
    poller = make(version=None, fingerprint=lambda i: f"fp-{i['x']}")
    assert run([{"id": "a", "x": 1}], poller=poller).events[0].version == "fp-1"


def test_replaying_reemits_unchanged_with_the_original_id() -> None:
    item = {"id": "a", "v": "1"}
    original = run([item])
    replayed = run([item], original.upserts, replaying=True, sequence=5)
    assert [(e.type, e.sequence) for e in replayed.events] == [("updated", 6)]
    assert replayed.events[0].id == original.events[0].id


def test_sequence_is_gap_free_from_the_start() -> None:
    items = [{"id": "a", "v": "1"}, {"id": "b", "v": "1"}, {"id": "c", "v": "9"}, {"id": "d"}]
    out = run(items, {"b": entry("1"), "c": entry("8")}, sequence=10)
    # b unchanged and d invalid: no number is spent on them.
    assert [(e.subject, e.sequence) for e in out.events] == [("a", 11), ("c", 12)]
    assert out.sequence == 12


def raise_on_bad(item: dict[str, Any]) -> Any:
    if item.get("bad"):
        raise KeyError("no id here")
    return item["id"]


@pytest.mark.parametrize(
    ("identity", "bad_item", "message"),
    [
        (raise_on_bad, {"bad": True}, "identity() raised KeyError"),
        (lambda i: i.get("id"), {"v": "1"}, "identity() returned None"),
        (lambda i: i["id"], {"id": {"nested": 1}, "v": "1"}, "must return a string"),
        (lambda i: i["id"], {"id": "", "v": "1"}, "identity() returned ''"),
        (lambda i: i["id"], {"id": True, "v": "1"}, "identity() returned True"),
        (lambda i: i["id"], {"id": 1.5, "v": "1"}, "got float"),
    ],
)
def test_invalid_identity_is_parked_and_others_go_on(
    identity: Any, bad_item: dict[str, Any], message: str
) -> None:
    poller = make(identity=identity)
    items = [{"id": "a", "v": "1"}, bad_item, {"id": "b", "v": "1"}]
    out = run(items, poller=poller, lane="reconcile")
    assert [(e.subject, e.sequence) for e in out.events] == [("a", 1), ("b", 2)]
    (parked,) = out.parked
    assert parked.kind == "invalid"
    assert parked.item == bad_item
    assert message in parked.error
    assert parked.poller == "invoices"
    assert parked.partition == "t_1"
    assert parked.lane == "reconcile"
    assert parked.attempts == 1
    assert parked.parked_at == NOW
    assert set(out.upserts) == {"a", "b"}


def test_invalid_version_is_parked() -> None:
    def version(item: dict[str, Any]) -> Any:
        return item["v"]

    out = run(
        [{"id": "a"}, {"id": "b", "v": None}, {"id": "c", "v": "1"}], poller=make(version=version)
    )
    assert [e.subject for e in out.events] == ["c"]
    errors = [p.error for p in out.parked]
    assert "version() raised KeyError" in errors[0]
    assert "version() returned None" in errors[1]


def test_parked_id_is_stable_per_item() -> None:
    bad = {"v": "1"}
    poller = make(identity=lambda i: i.get("id"))
    first = run([bad], poller=poller).parked[0]
    again = run([dict(bad)], poller=poller).parked[0]
    other = run([{"v": "2"}], poller=poller).parked[0]
    assert first.id == again.id
    assert first.id != other.id


def test_identify_reports_why() -> None:
    seen = identify(POLLER, {"id": "a", "v": 2})
    assert (seen.identity, seen.version) == ("a", "2")
    with pytest.raises(ValueError, match="identity"):
        identify(POLLER, {"v": 2})


def test_duplicates_in_one_page_produce_one_event() -> None:
    item = {"id": "a", "v": "1"}
    out = run([item, dict(item), dict(item)])
    assert [(e.type, e.subject) for e in out.events] == [("created", "a")]
    assert out.sequence == 1

    changed = run([{"id": "a", "v": "2"}, {"id": "a", "v": "2"}], {"a": entry("1")})
    assert [(e.type, e.version) for e in changed.events] == [("updated", "2")]


def test_two_versions_in_one_page_are_two_events() -> None:
    out = run([{"id": "a", "v": "1"}, {"id": "a", "v": "2"}])
    assert [(e.type, e.version) for e in out.events] == [("created", "1"), ("updated", "2")]
    assert out.upserts["a"].version == "2"


def test_duplicates_in_one_page_produce_one_event_while_replaying() -> None:
    item = {"id": "a", "v": "1"}
    out = run([item, dict(item)], {"a": entry("1")}, replaying=True)
    assert len(out.events) == 1


def test_two_partitions_never_share_ids() -> None:
    item = {"id": "a", "v": "1"}
    one = run([item], partition="t_1").events[0]
    two = run([item], partition="t_2").events[0]
    assert one.id != two.id
    assert (one.partition, two.partition) == ("t_1", "t_2")


def test_scan_marks_every_seen_entry() -> None:
    out = run([{"id": "a", "v": "1"}, {"id": "b", "v": "2"}], {"a": entry("1", scan=2)}, scan=3)
    assert out.upserts["a"] == SnapshotEntry(version="1", seen=NOW, scan=3)
    assert out.upserts["b"].scan == 3
    assert [e.subject for e in out.events] == ["b"]


def test_live_update_keeps_the_scan_number() -> None:
    out = run([{"id": "a", "v": "2"}], {"a": entry("1", scan=4)})
    assert out.upserts["a"].scan == 4


# deletions


def test_deletions_after_a_scan() -> None:
    snapshot = {
        "a": entry("1", scan=2),
        "b": entry("5", scan=2),
        "c": entry("3", scan=1, deleted=NOW - 50),
        "d": entry("7", scan=2),
    }
    out = run([{"id": "a", "v": "1"}, {"id": "d", "v": "8"}], snapshot, scan=3, sequence=20)
    deletions(POLLER, "t_1", snapshot, out, scan=3, now=NOW)
    types = [(e.type, e.subject, e.sequence) for e in out.events]
    assert types == [("updated", "d", 21), ("deleted", "b", 22)]
    deleted = out.events[-1]
    assert deleted.version == "5"
    assert deleted.lane == "reconcile"
    assert deleted.data is None
    assert deleted.id == event_id("invoices", "t_1", "b", "5", "deleted")
    assert deleted.id != event_id("invoices", "t_1", "b", "5")
    assert out.upserts["b"].deleted == NOW
    assert out.upserts["b"].version == "5"
    assert "c" not in out.upserts  # already deleted: no second event
    assert out.sequence == 22


def test_deleted_entry_seen_again_is_created() -> None:
    snapshot = {"a": entry("1", deleted=NOW - 10)}
    out = run([{"id": "a", "v": "1"}], snapshot)
    assert [e.type for e in out.events] == ["created"]
    assert out.upserts["a"].deleted is None


def test_expired_honours_retain() -> None:
    snapshot = {
        "old": entry("1", deleted=NOW - 1000),
        "edge": entry("1", deleted=NOW - 500),
        "young": entry("1", deleted=NOW - 499),
        "live": entry("1"),
    }
    assert sorted(expired(snapshot, 500.0, NOW)) == ["edge", "old"]
    assert expired(snapshot, 5000.0, NOW) == []


# items the store cannot publish, and items parked already


def test_an_event_the_store_refuses_is_parked_and_takes_no_sequence_number() -> None:
    def too_large(event: Any) -> str | None:
        return "event of 2000000 bytes exceeds max.message.bytes" if event.subject == "b" else None

    items = [{"id": "a", "v": "1"}, {"id": "b", "v": "1"}, {"id": "c", "v": "1"}]
    out = run(items, sequence=7, publishable=too_large)

    assert [(e.subject, e.sequence) for e in out.events] == [("a", 8), ("c", 9)]
    assert out.sequence == 9
    assert [(p.kind, p.subject) for p in out.parked] == [("invalid", "b")]
    assert "exceeds max.message.bytes" in out.parked[0].error
    assert "b" not in out.upserts  # not in the snapshot: a smaller version later is a change


def test_an_invalid_item_already_parked_is_not_parked_again() -> None:
    broken = {"v": "1"}  # no id
    first = run([broken])
    assert len(first.parked) == 1

    again = run([broken, {"id": "a", "v": "1"}], parked={first.parked[0].id})
    assert again.parked == []
    assert [e.subject for e in again.events] == ["a"]
    changed = run([{"v": "2"}], parked={first.parked[0].id})  # other content: parked
    assert len(changed.parked) == 1
