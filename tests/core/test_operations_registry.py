"""The operations registry (watukuy.core.operations): names, argument codecs, pure applies,
the connector operations and the KIP-875 offsets shape."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.errors import ConfigError
from watukuy.core.lifecycle import Target
from watukuy.core.operations import (
    CONNECTOR_OPERATIONS,
    KEY_OPERATIONS,
    Effect,
    KeyView,
    connector_operation,
    decode_offsets,
    key_operation,
    offsets_of,
)
from watukuy.core.poll import fresh_state
from watukuy.core.poller import Poller, define_poller
from watukuy.core.schedule import KeySchedule
from watukuy.core.state import LaneState, PartitionState, SnapshotEntry, Validators

pytestmark = pytest.mark.unit

NOW = 1_750_000_000.0
LATER = NOW + 500


def poller(strategy: str = "token") -> Poller:
    cursor: dict[str, Any] = {"strategy": strategy, "initial": "start"}
    if strategy == "timestamp":
        cursor = {"strategy": "timestamp", "field": "updated_at", "initial": None}
    return define_poller(
        name="invoices",
        fetch=lambda ctx: None,
        identity=lambda i: i["id"],
        partitions=lambda: [],
        cursor=cursor,
        schedule={"min": "30s", "max": "15m"},
    )


def state(p: Poller | None = None) -> PartitionState:
    base = fresh_state(p or poller(), "t_42", NOW)
    return replace(
        base,
        live=LaneState(cursor="2026-01-01T00:00:00Z"),
        schedule=KeySchedule(interval=600.0, next_due=NOW + 600, throttle_until=0.0),
        validators=(("https://x/a", Validators(etag='"e"')),),
        sequence=17,
        epoch=3,
    )


SNAPSHOT = {"a": SnapshotEntry("v1", NOW), "b": SnapshotEntry("v2", NOW)}


def view(p: Poller | None = None, s: PartitionState | None = None) -> KeyView:
    p = p or poller()
    return KeyView(p, s or state(p), SNAPSHOT)


# -- names ------------------------------------------------------------------------------------


def test_the_per_key_operations() -> None:
    assert list(KEY_OPERATIONS) == [
        "trigger",
        "wake",
        "pause",
        "resume",
        "backfill",
        "replay",
        "reset_cursor",
        "reconcile",
        "retry",
        "remove",
        "alter_offsets",
        "adopt",
        "pause_child",
        "resume_child",
    ]
    assert {n: op.effect for n, op in KEY_OPERATIONS.items() if op.effect is not Effect.STATE} == {
        "retry": Effect.RETRY,
        "remove": Effect.REMOVE,
    }
    assert key_operation("reset") is KEY_OPERATIONS["reset_cursor"]  # the REST/CLI verb


def test_an_unknown_operation_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown operation 'explode'; expected one of: trigger"):
        key_operation("explode")


def test_which_targets_allow_which_operations() -> None:
    holding = {Target.RUNNING, Target.PAUSED}
    for name, op in KEY_OPERATIONS.items():
        expected = {
            "remove": set(Target),
            "alter_offsets": {Target.STOPPED},
            # Sent by a parent's commit: a child is created whatever its connector does.
            "adopt": set(Target),
            "pause_child": set(Target),
            "resume_child": set(Target),
        }.get(name, holding)
        assert op.allowed == expected, name


def test_the_connector_operations_and_their_targets() -> None:
    assert {n: op.target for n, op in CONNECTOR_OPERATIONS.items()} == {
        "pause": Target.PAUSED,
        "resume": Target.RUNNING,
        "stop": Target.STOPPED,
        "restart": None,
    }
    assert connector_operation("restart").restarts
    assert not connector_operation("stop").restarts
    with pytest.raises(ConfigError, match="unknown connector operation 'halt'") as raised:
        connector_operation("halt", "path")
    assert raised.value.path == "path"


# -- argument codecs --------------------------------------------------------------------------

JSON: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
OFFSETS = st.none() | st.dictionaries(st.sampled_from(["live", "backfill", "reconcile"]), JSON)

VALUES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "trigger": st.just({}),
    "pause": st.just({}),
    "resume": st.just({}),
    "backfill": st.fixed_dictionaries({"from_": JSON}),
    "replay": st.fixed_dictionaries({"from_": JSON}),
    "reset_cursor": st.fixed_dictionaries({"to": JSON, "clear_snapshot": st.booleans()}),
    "reconcile": st.just({}),
    "retry": st.fixed_dictionaries({"ids": st.lists(st.text(min_size=1, max_size=8))}),
    "remove": st.just({}),
    "alter_offsets": st.fixed_dictionaries({"offset": OFFSETS}),
    "adopt": st.just({}),
    "pause_child": st.just({}),
    "resume_child": st.just({}),
    "wake": st.just({}),
}


def test_every_operation_has_a_round_trip_strategy() -> None:
    assert set(VALUES) == set(KEY_OPERATIONS)


@pytest.mark.parametrize("name", list(KEY_OPERATIONS))
@given(data=st.data())
def test_each_operation_round_trips_through_its_json_form(name: str, data: st.DataObject) -> None:
    op = KEY_OPERATIONS[name]
    values = data.draw(VALUES[name])
    checked = op.values(values)
    assert checked == values
    encoded = op.encode(checked)
    assert set(encoded) == {a.name for a in op.arguments}  # JSON names: "from", not "from_"
    assert op.decode(encoded) == checked


def test_json_names_are_the_rest_bodys() -> None:
    assert KEY_OPERATIONS["backfill"].encode({"from_": 5}) == {"from": 5}
    assert KEY_OPERATIONS["reset_cursor"].decode({"to": "x"}) == {
        "to": "x",
        "clear_snapshot": False,
    }
    assert KEY_OPERATIONS["replay"].decode(None) == {"from_": None}
    assert KEY_OPERATIONS["retry"].decode({}) == {"ids": []}
    # Records written before the registry spelled the argument from_.
    assert KEY_OPERATIONS["backfill"].decode({"from_": 7}) == {"from_": 7}


def test_a_datetime_cursor_enters_as_its_iso_text() -> None:
    op = KEY_OPERATIONS["replay"]
    plus_two = timezone(timedelta(hours=2))
    assert op.values({"from_": datetime(2026, 9, 1, 2, 0, tzinfo=plus_two)}) == {
        "from_": "2026-09-01T00:00:00Z"
    }
    assert op.values({"from_": datetime(2026, 9, 1, 0, 0, 0, 5, tzinfo=UTC)}) == {
        "from_": "2026-09-01T00:00:00.000005Z"
    }
    assert op.values({"from_": ("a", 1)}) == {"from_": ["a", 1]}


BAD_ARGUMENTS = [
    ("backfill", {"from": datetime(2026, 9, 1)}, "from", "needs a time zone"),
    ("backfill", {"from": {1: "x"}}, "from", "keys must be strings"),
    ("backfill", {"from": {"a": [1, float("nan")]}}, "from.a[1]", "must be a finite number"),
    ("replay", {"from": object()}, "from", r"must be a JSON value \(a cursor\), got an object"),
    ("replay", {"form": "2026"}, "form", "unknown argument; did you mean 'from'?"),
    ("reset_cursor", {"clear_snapshot": "yes"}, "clear_snapshot", "must be true or false"),
    ("reset_cursor", {"to": 1, "zap": 1}, "zap", "expected one of: to, clear_snapshot"),
    ("trigger", {"now": True}, "now", "takes no arguments"),
    ("retry", {"ids": "p1"}, "ids", "must be a list of parked item ids, got a str"),
    ("retry", {"ids": ["p1", ""]}, "ids[1]", "must be a non-empty string"),
    ("retry", {"ids": ["p1", 3]}, "ids[1]", "must be a non-empty string, got an int"),
    ("alter_offsets", {"offset": 5}, "offset", "must be a mapping of lane to cursor"),
    ("alter_offsets", {"offset": {"lve": 1}}, "offset.lve", "did you mean 'live'?"),
]


@pytest.mark.parametrize(("name", "raw", "path", "message"), BAD_ARGUMENTS)
def test_bad_arguments_name_the_argument(
    name: str, raw: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        KEY_OPERATIONS[name].decode(raw)
    assert raised.value.path == path


def test_bad_arguments_are_named_under_a_prefix_and_the_body_must_be_an_object() -> None:
    with pytest.raises(ConfigError) as raised:
        KEY_OPERATIONS["backfill"].decode({"from": float("inf")}, "args")
    assert raised.value.path == "args.from"
    with pytest.raises(ConfigError, match="must be a JSON object, got a list") as raised:
        KEY_OPERATIONS["backfill"].decode([1])
    assert raised.value.path == "args"


def test_python_keywords_are_checked_with_the_json_names() -> None:
    with pytest.raises(ConfigError, match="needs a time zone") as raised:
        KEY_OPERATIONS["replay"].values({"from_": datetime(2026, 1, 1)})
    assert raised.value.path == "from"


# -- applies ----------------------------------------------------------------------------------


def apply(name: str, values: dict[str, Any] | None = None, v: KeyView | None = None) -> Any:
    op = KEY_OPERATIONS[name]
    return op.apply(v or view(), op.values(values or {}), LATER)


def test_trigger_makes_the_key_due_now_and_nothing_else() -> None:
    change = apply("trigger")
    assert change.state == replace(state(), schedule=replace(state().schedule, next_due=LATER))
    assert change.forget == ()


def test_pause_and_resume_set_the_stored_flag_and_when() -> None:
    assert apply("pause").state == replace(state(), paused="user", paused_at=LATER)
    paused = view(s=replace(state(), paused="user", paused_at=LATER - 5))
    assert apply("resume", v=paused).state == state()


def test_reconcile_is_due_now() -> None:
    assert apply("reconcile").state == replace(state(), reconcile_due=LATER)


def test_backfill_starts_its_lane_and_a_timestamp_one_stops_where_live_was() -> None:
    token = apply("backfill", {"from_": 100}).state
    assert token.backfill == LaneState(cursor=100, active=True, until=None)
    assert token.live == state().live and token.schedule == state().schedule

    p = poller("timestamp")
    timestamp = apply("backfill", {"from_": None}, view(p)).state
    assert timestamp.backfill == LaneState(cursor=None, active=True, until="2026-01-01T00:00:00Z")


def test_replay_restarts_live_replaying_without_validators_and_due_now() -> None:
    after = apply("replay", {"from_": "2025-01-01T00:00:00Z"}).state
    assert after.live == LaneState(cursor="2025-01-01T00:00:00Z", replaying=True)
    assert after.validators == ()
    assert after.schedule.next_due == LATER
    assert (after.sequence, after.epoch) == (17, 3)


def test_reset_cursor_moves_live_and_forgets_the_snapshot_only_when_asked() -> None:
    kept = apply("reset_cursor", {"to": "x"})
    assert kept.state.live == LaneState(cursor="x")
    assert kept.state.validators == () and kept.state.schedule.next_due == LATER
    assert kept.forget == ()
    cleared = apply("reset_cursor", {"to": None, "clear_snapshot": True})
    assert cleared.state.live == LaneState()
    assert sorted(cleared.forget) == ["a", "b"]


def test_alter_offsets_sets_the_lanes_given() -> None:
    s = replace(state(), backfill=LaneState(cursor=1, active=True, until=9))
    change = apply("alter_offsets", {"offset": {"backfill": 5}}, view(s=s))
    assert change.state.backfill == LaneState(cursor=5, active=True, until=9)
    assert change.state.live == s.live and change.state.validators == s.validators
    assert change.forget == ()

    change = apply("alter_offsets", {"offset": {"live": "c", "reconcile": 3}}, view(s=s))
    assert change.state.live == LaneState(cursor="c")
    assert change.state.reconcile.cursor == 3
    assert change.state.validators == ()  # a 304 must not hide what the new cursor reads


def test_alter_offsets_to_none_starts_the_key_over_keeping_its_sequence() -> None:
    s = replace(
        state(),
        backfill=LaneState(cursor=1, active=True),
        reconcile=LaneState(cursor=2, active=True, scan=4),
        paused="user",
    )
    change = apply("alter_offsets", {"offset": None}, view(s=s))
    assert change.state.live == LaneState(cursor="start")  # the poller's initial cursor
    assert change.state.backfill == LaneState() and change.state.reconcile == LaneState()
    assert change.state.validators == ()
    assert (change.state.sequence, change.state.epoch, change.state.paused) == (17, 3, "user")
    assert sorted(change.forget) == ["a", "b"]


def test_retry_and_remove_have_no_pure_apply() -> None:
    for name in ("retry", "remove"):
        with pytest.raises(ConfigError, match="does not change a key's state by itself"):
            KEY_OPERATIONS[name].apply(view(), KEY_OPERATIONS[name].values({}), NOW)


# -- offsets ----------------------------------------------------------------------------------


def test_offsets_of_a_state_is_kip_875s_shape() -> None:
    s = replace(state(), backfill=LaneState(cursor=3), reconcile=LaneState(cursor={"p": 2}))
    assert offsets_of(s) == {
        "partition": {"key": "t_42"},
        "offset": {"live": "2026-01-01T00:00:00Z", "backfill": 3, "reconcile": {"p": 2}},
    }


def test_decode_offsets() -> None:
    raw = [
        {"partition": {"key": "a"}, "offset": {"live": 1}},
        {"partition": {"key": "b"}, "offset": None},
    ]
    assert decode_offsets(raw, partitioned=True) == [("a", {"live": 1}), ("b", None)]
    assert decode_offsets([{"partition": {}, "offset": None}], partitioned=False) == [("", None)]


BAD_OFFSETS = [
    ({"partition": {"key": "a"}}, "offsets", "must be a list"),
    ([5], "offsets[0]", "must be a mapping with partition and offset"),
    ([{"partition": {"key": "a"}}], "offsets[0].offset", "is required"),
    (
        [{"partiton": {"key": "a"}, "offset": None}],
        "offsets[0].partiton",
        "did you mean 'partition'",
    ),
    ([{"partition": "a", "offset": None}], "offsets[0].partition", "must be a mapping like"),
    ([{"partition": {"key": ""}, "offset": None}], "offsets[0].partition.key", "non-empty"),
    ([{"partition": {"key": 4}, "offset": None}], "offsets[0].partition.key", "must be a string"),
    (
        [{"partition": {"kee": "a"}, "offset": None}],
        "offsets[0].partition.kee",
        "did you mean 'key'",
    ),
    (
        [{"partition": {"key": "a"}, "offset": None}, {"partition": {"key": "a"}, "offset": {}}],
        "offsets[1].partition.key",
        "given twice",
    ),
    ([{"partition": {"key": "a"}, "offset": {"live": object()}}], "offsets[0].offset.live", "JSON"),
]


@pytest.mark.parametrize(("raw", "path", "message"), BAD_OFFSETS)
def test_bad_offsets_name_the_field(raw: object, path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        decode_offsets(raw, partitioned=True)
    assert raised.value.path == path


def test_a_poller_without_partitions_has_only_the_empty_key() -> None:
    with pytest.raises(ConfigError, match="no partitions") as raised:
        decode_offsets([{"partition": {"key": "a"}, "offset": None}], partitioned=False)
    assert raised.value.path == "offsets[0].partition.key"


# -- child streams' operations ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["adopt", "resume_child"])
def test_adopt_and_resume_child_resume_only_a_child_its_parent_paused(name: str) -> None:
    adopt = KEY_OPERATIONS[name]
    live = state()
    assert adopt.apply(view(s=live), {}, LATER).state == live  # a live child is not re-read
    by_user = replace(live, paused="user")
    assert adopt.apply(view(s=by_user), {}, LATER).state == by_user
    resumed = adopt.apply(view(s=replace(live, paused="parent")), {}, LATER).state
    assert resumed.paused is None
    assert resumed.schedule.next_due == LATER  # due at once


def test_pause_child_keeps_a_users_pause() -> None:
    pause = KEY_OPERATIONS["pause_child"]
    assert pause.apply(view(), {}, LATER).state.paused == "parent"
    by_user = replace(state(), paused="user")
    assert pause.apply(view(s=by_user), {}, LATER).state.paused == "user"
