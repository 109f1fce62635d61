"""A key's status, pure: from ``inspect()``, as records, in the table every instance keeps, and
what a publish writes. No broker; time is a number the test sets."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from watukuy.control.keystatus import (
    BackfillProgress,
    Heartbeat,
    KeyStatus,
    Outbox,
    StatusTable,
    decode_record,
    encode_heartbeat,
    encode_status,
    heartbeat_key,
    key_status,
    status_key,
)
from watukuy.control.status import key_statuses
from watukuy.core.errors import StateCorrupted
from watukuy.core.inspect import PollerInspect

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
NEEDS = "NeedsAuthorization: tenant 'acme': the provider refused its grant (invalid_grant)"


def _inspect(**changes: Any) -> PollerInspect:
    values: dict[str, Any] = {
        "poller": "invoices",
        "partition": "acme",
        "paused": False,
        "circuit": "closed",
        "interval": 30.0,
        "next_due": None,
        "lag": 12.5,
        "parked": {"invalid": 1, "poison": 0},
        "owner": "r1",
    }
    values.update(changes)
    return PollerInspect(**values)


def _status(partition: str = "acme", **changes: Any) -> KeyStatus:
    values: dict[str, Any] = {
        "poller": "invoices",
        "partition": partition,
        "state": "RUNNING",
        "owner": "r1",
        "lag": 3.0,
        "circuit": "closed",
        "parked": {"invalid": 0, "poison": 0},
        "updated_at": NOW,
    }
    values.update(changes)
    return KeyStatus(**values)


# -- from inspect -----------------------------------------------------------------------------


def test_a_healthy_key_is_running_with_what_inspect_says() -> None:
    status = key_status(_inspect(), now=NOW)
    assert status == KeyStatus(
        poller="invoices",
        partition="acme",
        state="RUNNING",
        owner="r1",
        lag=12.5,
        circuit="closed",
        parked={"invalid": 1, "poison": 0},
        backfill=None,
        last_error=None,
        updated_at=NOW,
    )


@pytest.mark.parametrize(
    ("changes", "target", "state"),
    [
        ({"paused": True}, "RUNNING", "PAUSED"),
        ({}, "PAUSED", "PAUSED"),
        ({"circuit": "open", "last_error": "HTTP 500"}, "RUNNING", "FAILED"),
        ({"circuit": "half-open"}, "RUNNING", "RUNNING"),  # probing: not failed
        ({"circuit": "open", "paused": True}, "RUNNING", "PAUSED"),
        ({"circuit": "open"}, "STOPPED", "STOPPED"),
        ({"paused": True}, "STOPPED", "STOPPED"),
        ({"last_error": NEEDS}, "RUNNING", "NEEDS_AUTHORIZATION"),
        ({"last_error": NEEDS, "circuit": "open"}, "RUNNING", "NEEDS_AUTHORIZATION"),
        ({"last_error": NEEDS, "paused": True}, "RUNNING", "PAUSED"),
        ({"last_error": NEEDS}, "STOPPED", "STOPPED"),
    ],
)
def test_the_state_of_a_key(changes: dict[str, Any], target: str, state: str) -> None:
    assert key_status(_inspect(**changes), now=NOW, target=target).state == state


WAITS = "waits for a newer release of watukuy to read its stored state: format_version 2"


@pytest.mark.parametrize(
    ("changes", "target"),
    [
        ({}, "RUNNING"),
        ({"paused": True}, "RUNNING"),  # resuming would not make it run
        ({}, "PAUSED"),
        ({"circuit": "open"}, "RUNNING"),
    ],
)
def test_a_key_waiting_for_a_newer_release_is_unassigned_with_why(
    changes: dict[str, Any], target: str
) -> None:
    """Owned here but run by no one: not RUNNING (Connect's "this instance works on it")."""
    waiting = _inspect(waiting_newer=True, lag=None, last_error=WAITS, **changes)
    status = key_status(waiting, now=NOW, target=target)
    assert (status.state, status.owner, status.last_error) == ("UNASSIGNED", "r1", WAITS)
    # Its connector stopped: stopped like every other key of it.
    assert key_status(waiting, now=NOW, target="STOPPED").state == "STOPPED"


def test_last_error_is_kept_and_capped() -> None:
    assert key_status(_inspect(last_error="HTTP 503"), now=NOW).last_error == "HTTP 503"
    long = key_status(_inspect(last_error="x" * 2000), now=NOW).last_error
    assert long is not None and len(long) == 500


def test_backfill_progress_comes_from_the_backfill_lane() -> None:
    lanes: dict[str, object] = {"backfill": {"pages": 4, "items": 380, "cursor": "p-5"}}
    status = key_status(_inspect(backfill=True, lanes=lanes), now=NOW)
    assert status.backfill == BackfillProgress(pages=4, items=380, cursor="p-5", fraction=None)
    # Without the lane's figures, a running backfill still shows as one.
    assert key_status(_inspect(backfill=True), now=NOW).backfill == BackfillProgress()
    assert key_status(_inspect(backfill=False, lanes=lanes), now=NOW).backfill is None


def test_backfill_fraction_from_times_or_numbers_or_given() -> None:
    def fraction(lane: dict[str, object]) -> float | None:
        progress = key_status(_inspect(backfill=True, lanes={"backfill": lane}), now=NOW).backfill
        assert progress is not None
        return progress.fraction

    times = {"start": "2026-01-01T00:00:00Z", "until": "2026-01-11T00:00:00Z"}
    assert fraction({**times, "cursor": "2026-01-03T12:00:00Z"}) == pytest.approx(0.25)
    assert fraction({**times, "cursor": "2025-12-01T00:00:00Z"}) == 0.0  # clamped
    assert fraction({**times, "cursor": "2026-01-03T12:00:00"}) is None  # no zone: not guessed
    assert fraction({**times, "cursor": "opaque-token"}) is None
    assert fraction({"start": 100, "until": 0, "cursor": 25}) == pytest.approx(0.75)  # backwards
    assert fraction({"fraction": 0.4, "cursor": "x"}) == 0.4
    assert fraction({"start": 5, "until": 5, "cursor": 5}) is None


def test_a_long_cursor_is_shortened_for_the_status() -> None:
    lanes: dict[str, object] = {"backfill": {"cursor": "t" * 1000}}
    progress = key_status(_inspect(backfill=True, lanes=lanes), now=NOW).backfill
    assert progress is not None and isinstance(progress.cursor, str)
    assert len(progress.cursor) == 200 and progress.cursor.endswith("…")


def test_key_statuses_take_each_pollers_target() -> None:
    inspections = [_inspect(), _inspect(poller="orders", partition="")]
    states = [s.state for s in key_statuses(inspections, now=NOW, targets={"orders": "STOPPED"})]
    assert states == ["RUNNING", "STOPPED"]


# -- records ----------------------------------------------------------------------------------


def test_a_status_round_trips_as_sorted_json() -> None:
    status = _status(
        partition="a/b",  # partition keys may hold slashes: the poller name cannot
        state="FAILED",
        lag=None,
        backfill=BackfillProgress(pages=2, items=10, cursor={"page": 3}, fraction=0.5),
        last_error="HTTP 500 from GET https://x/{partition.data.slug}",
    )
    key, value = status_key("invoices", "a/b"), encode_status(status)
    assert key == b"key/invoices/a/b"
    assert value.decode() == json.dumps(json.loads(value), sort_keys=True, separators=(",", ":"))
    assert json.loads(value)["format_version"] == 1
    record = decode_record(key, value)
    assert record is not None and record.name == "invoices/a/b" and record.value == status


def test_a_waiting_keys_status_round_trips_with_its_owner_and_why() -> None:
    status = key_status(_inspect(waiting_newer=True, lag=None, last_error=WAITS), now=NOW)
    value = json.loads(encode_status(status))
    assert (value["state"], value["owner"], value["last_error"]) == ("UNASSIGNED", "r1", WAITS)
    record = decode_record(status_key("invoices", "acme"), encode_status(status))
    assert record is not None and record.value == status


def test_a_heartbeat_round_trips_and_tombstones_decode_as_none() -> None:
    value = encode_heartbeat(Heartbeat("r1", NOW))
    record = decode_record(heartbeat_key("r1"), value)
    assert record is not None and record.value == Heartbeat("r1", NOW)
    gone = decode_record(b"worker/r1", None)
    assert gone is not None and gone.kind == "worker" and gone.value is None


def test_what_live_runners_hold_restored_or_restoring_is_claimed() -> None:
    beat = Heartbeat("r1", NOW, partitions=(0, 2), restoring=(5,))
    record = decode_record(heartbeat_key("r1"), encode_heartbeat(beat))
    assert record is not None and record.value == beat
    older = b'{"format_version": 1, "runner": "r3", "at": %d, "partitions": [7]}' % NOW
    table = _table(
        (heartbeat_key("r1"), encode_heartbeat(beat)),
        (heartbeat_key("r2"), encode_heartbeat(Heartbeat("r2", NOW - 20, partitions=(1,)))),
        (heartbeat_key("r3"), older),  # written before "restoring" was: owned only
    )
    assert table.claimed(now=NOW + 5, session_timeout=10) == {0, 2, 5, 7}
    assert table.claimed(now=NOW + 5, session_timeout=10, but="r1") == {7}


@pytest.mark.parametrize("key", [None, b"connector/x", b"key/no-partition", b"other"])
def test_keys_of_no_status_are_ignored(key: bytes | None) -> None:
    assert decode_record(key, b"{}") is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"format_version": 2}', "newer than 1"),
        (b'{"format_version": 1, "poller": "p"}', "KeyError"),
        (
            b'{"format_version": 1, "poller": "p", "partition": "a", "state": "DANCING", '
            b'"circuit": "closed", "updated_at": 1}',
            "unknown state",
        ),
    ],
)
def test_an_unreadable_status_is_refused(value: bytes, why: str) -> None:
    with pytest.raises(StateCorrupted, match=why):
        decode_record(b"key/p/a", value)


# -- the table --------------------------------------------------------------------------------


def _table(*records: tuple[bytes, bytes | None]) -> StatusTable:
    table = StatusTable()
    for key, value in records:
        table.apply(key, value)
    return table


def test_the_table_keeps_the_latest_of_each_key_and_shows_dead_owners_unassigned() -> None:
    table = _table(
        (heartbeat_key("r1"), encode_heartbeat(Heartbeat("r1", NOW))),
        (heartbeat_key("r2"), encode_heartbeat(Heartbeat("r2", NOW - 20))),
        (status_key("invoices", "b"), encode_status(_status("b", owner="r2"))),
        (status_key("invoices", "a"), encode_status(_status("a", state="RUNNING"))),
        (status_key("invoices", "a"), encode_status(_status("a", state="PAUSED"))),
        (status_key("invoices", "c"), encode_status(_status("c", owner="r3"))),  # never beat
        (status_key("orders", ""), encode_status(_status("", poller="orders"))),
    )
    shown = table.view("invoices", now=NOW + 5, session_timeout=10)
    assert [(s.partition, s.state, s.owner) for s in shown] == [
        ("a", "PAUSED", "r1"),
        ("b", "UNASSIGNED", "r2"),
        ("c", "UNASSIGNED", "r3"),
    ]
    assert [s.poller for s in table.view(now=NOW, session_timeout=10)] == [
        "invoices",
        "invoices",
        "invoices",
        "orders",
    ]
    assert table.pollers() == ["invoices", "orders"]
    # A heartbeat exactly a session old is still alive; a moment later it is not.
    assert table.alive("r1", now=NOW + 10, session_timeout=10)
    assert not table.alive("r1", now=NOW + 10.001, session_timeout=10)


def test_an_unassigned_key_says_why_only_while_its_owner_is_alive() -> None:
    """A live owner's UNASSIGNED key (it waits for a newer release) keeps its reason; a gone
    owner's last error no longer says why a key is not run, so the view drops it."""
    table = _table(
        (heartbeat_key("r1"), encode_heartbeat(Heartbeat("r1", NOW))),
        (heartbeat_key("r2"), encode_heartbeat(Heartbeat("r2", NOW - 20))),
        (
            status_key("invoices", "a"),
            encode_status(_status("a", state="UNASSIGNED", last_error=WAITS)),
        ),
        (
            status_key("invoices", "b"),
            encode_status(_status("b", owner="r2", state="FAILED", last_error="HTTP 500")),
        ),
    )
    shown = table.view("invoices", now=NOW + 5, session_timeout=10)
    assert [(s.partition, s.state, s.owner, s.last_error) for s in shown] == [
        ("a", "UNASSIGNED", "r1", WAITS),
        ("b", "UNASSIGNED", "r2", None),
    ]


def test_a_tombstoned_heartbeat_or_status_is_gone() -> None:
    table = _table(
        (heartbeat_key("r1"), encode_heartbeat(Heartbeat("r1", NOW))),
        (status_key("invoices", "a"), encode_status(_status("a"))),
        (status_key("invoices", "b"), encode_status(_status("b"))),
        (heartbeat_key("r1"), None),
        (status_key("invoices", "b"), None),
    )
    assert [(s.partition, s.state) for s in table.view(now=NOW, session_timeout=10)] == [
        ("a", "UNASSIGNED")
    ]
    assert table.heartbeats() == {}


# -- what a publish writes --------------------------------------------------------------------


def test_the_outbox_writes_changes_and_every_key_every_30s() -> None:
    outbox = Outbox(full_every=30)

    def publish(statuses: list[KeyStatus], now: float) -> list[str]:
        due = outbox.due(statuses, now)
        for status in due:
            outbox.written(status, now)
        return [s.partition for s in due]

    assert publish([_status("a"), _status("b")], NOW) == ["a", "b"]
    assert publish([_status("a", lag=9.0, updated_at=NOW + 6), _status("b")], NOW + 6) == []
    assert publish([_status("a", lag=None), _status("b")], NOW + 7) == ["a"]  # no success yet
    assert publish([_status("a", lag=None), _status("b", parked={"poison": 1})], NOW + 8) == ["b"]
    assert publish([_status("a", lag=None), _status("b", parked={"poison": 1})], NOW + 29) == []
    assert publish([_status("a", lag=None), _status("b", parked={"poison": 1})], NOW + 37) == ["a"]
    assert publish([_status("a", lag=None), _status("b", parked={"poison": 1})], NOW + 38) == ["b"]

    outbox.forget("invoices", "b")
    assert publish([_status("b", parked={"poison": 1})], NOW + 39) == ["b"]


def test_the_outbox_names_each_key_due_again_once_per_write() -> None:
    outbox = Outbox(full_every=30)
    outbox.written(_status("a"), NOW)
    outbox.written(_status("b"), NOW + 10)
    outbox.written(_status("c"), NOW + 10)
    outbox.forget("invoices", "c")  # removed: never due again

    assert outbox.due_again(NOW + 29.9) == []
    assert outbox.due_again(NOW + 30) == ["invoices/a"]
    assert outbox.due_again(NOW + 30) == []  # named once
    outbox.written(_status("a"), NOW + 31)
    assert outbox.due_again(NOW + 45) == ["invoices/b"]
    outbox.written(_status("b"), NOW + 46)  # written again before it came up: no longer due
    assert outbox.due_again(NOW + 61) == ["invoices/a"]
    assert outbox.due_again(NOW + 100) == ["invoices/b"]


def test_the_outbox_gives_back_what_it_wrote_of_keys_let_go() -> None:
    outbox = Outbox(full_every=30)
    outbox.written(_status("a"), NOW)
    outbox.written(_status("b"), NOW)

    assert [s.partition for s in outbox.released(["invoices/a", "invoices/z"])] == ["a"]
    assert outbox.released(["invoices/a"]) == []  # forgotten as it was given back
    assert outbox.stale("invoices/a", NOW + 1) and not outbox.stale("invoices/b", NOW + 1)


def test_utc_times_in_cursors_with_offsets_agree() -> None:
    lanes: dict[str, object] = {
        "backfill": {
            "start": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
            "until": "2026-01-02T02:00:00+02:00",  # midnight UTC
            "cursor": "2026-01-01T12:00:00Z",
        }
    }
    progress = key_status(_inspect(backfill=True, lanes=lanes), now=NOW).backfill
    assert progress is not None and progress.fraction == pytest.approx(0.5)
