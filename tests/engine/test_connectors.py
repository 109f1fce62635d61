"""Connectors at run time on the memory store: add_poller, remove_poller, set_target (RUNNING,
PAUSED, STOPPED), restart, offsets and alter_offsets; and operations arriving as commands."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from tests.engine.support import Env, HeldCommits
from tests.engine.test_handlers import strip_id_of
from tests.engine.test_operations import AFTER_HISTORY
from watukuy import ConfigError, Engine, MemoryStore
from watukuy.core.errors import Conflict
from watukuy.core.operations import KEY_OPERATIONS
from watukuy.core.state import LaneState
from watukuy.store.base import Command, KeyCommit


def key(partition: str, poller: str = "invoices") -> str:
    return f"{poller}/{partition}"


def inspected(engine: Engine, poller: str = "invoices") -> dict[str, Any]:
    return {i.partition: i for i in engine.inspect() if i.poller == poller}


def requests(env: Env) -> dict[str, int]:
    return {t.id: env.sim.request_count(t.id) for t in env.tenants}


# -- add_poller / remove_poller ----------------------------------------------------------------


async def test_a_poller_added_at_run_time_is_polled_and_its_events_delivered(env: Env) -> None:
    engine = env.make_engine(env.make_poller())
    await engine.tick()
    with pytest.raises(ConfigError, match="unknown poller 'orders'"):
        engine.on("orders", lambda event, ctx: None)

    await engine.add_poller(env.make_poller(name="orders"))

    assert set(inspected(engine, "orders")) == {t.id for t in env.tenants}
    assert engine.target("orders") == "RUNNING"
    assert sorted(engine.pollers) == ["invoices", "orders"]
    orders = env.recorder(engine, "orders")
    await engine.tick()
    for tenant in env.tenants:
        assert [e.sequence for e in orders.of(tenant.id)] == list(range(1, 11))
    assert {e.poller for e in orders.events} == {"orders"}


async def test_add_poller_checks_what_it_is_given(env: Env) -> None:
    engine = env.make_engine(env.make_poller())
    with pytest.raises(ConfigError, match="must be made with define_poller") as raised:
        await engine.add_poller({"name": "orders"})  # type: ignore[arg-type]
    assert raised.value.path == "poller"
    with pytest.raises(ConfigError, match="unknown budget 'vendor'"):
        await engine.add_poller(env.make_poller(name="orders", budget="vendor"))
    with pytest.raises(ConfigError, match="must be one of: RUNNING, PAUSED, STOPPED"):
        await engine.add_poller(env.make_poller(name="orders"), target="ASLEEP")
    assert sorted(engine.pollers) == ["invoices"]


async def test_a_redefined_poller_restarts_its_keys_with_their_state(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    first = recorder.take()
    assert len(first) == 30
    await engine.pause("invoices", partition=env.tid(2))

    await engine.add_poller(env.make_poller(fetch=env.token_fetch(limit=4)))

    assert set(inspected(engine)) == {t.id for t in env.tenants}
    assert inspected(engine)[env.tid(2)].paused is True  # the user's pause is kept
    tenant = env.tid(0)
    created = env.sim.create_item(tenant)
    before = env.sim.request_count(tenant)
    env.clock.advance(900)
    await engine.tick()
    # Nothing re-emitted: cursor and snapshot were kept; the sequence goes on.
    assert [(e.subject, e.sequence) for e in recorder.take()] == [(created["id"], 11)]
    assert env.sim.log(tenant)[before].query.get("limit") == "4"  # the new definition polls
    assert store.states[key(tenant)].sequence == 11


async def test_a_removed_poller_stops_its_keys_and_keeps_their_state(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    stored = dict(store.states)

    await engine.remove_poller("invoices")

    assert engine.inspect() == [] and engine.pollers == {}
    before = requests(env)
    env.clock.advance(3600)
    await engine.tick()
    assert requests(env) == before
    assert store.states == stored
    for operation in (
        engine.trigger("invoices", partition=env.tid(0)),
        engine.remove_poller("invoices"),
    ):
        with pytest.raises(ConfigError, match="unknown poller 'invoices'"):
            await operation
    with pytest.raises(ConfigError, match="unknown poller 'invoices'"):
        engine.target("invoices")

    # Added back, it continues where it left off.
    created = env.sim.create_item(env.tid(1))
    await engine.add_poller(env.make_poller())
    await engine.tick()
    assert [(e.partition, e.subject, e.sequence) for e in recorder.take()] == [
        (env.tid(1), created["id"], 11)
    ]


# -- targets -----------------------------------------------------------------------------------


async def test_a_paused_connector_keeps_its_keys_without_polling_and_a_user_pause_outlives_it(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    user_paused, other = env.tid(0), env.tid(1)

    await engine.set_target("invoices", "PAUSED")

    assert engine.target("invoices") == "PAUSED"
    entries = inspected(engine)
    assert set(entries) == {t.id for t in env.tenants}
    assert all(e.paused and e.next_due is None for e in entries.values())
    before = requests(env)
    for tenant in (user_paused, other):
        env.sim.update_item(tenant, env.sim.items(tenant)[0]["id"], amount=2.0)
    env.clock.advance(3600)
    await engine.tick()
    assert requests(env) == before
    assert recorder.events == []

    # Operations still apply to the held keys.
    await engine.pause("invoices", partition=user_paused)
    assert store.states[key(user_paused)].paused == "user"

    await engine.set_target("invoices", "RUNNING")
    assert inspected(engine)[user_paused].paused is True
    assert inspected(engine)[other].paused is False
    await engine.tick()
    assert [e.partition for e in recorder.take()] == [other]
    assert env.sim.request_count(user_paused) == before[user_paused]

    await engine.resume("invoices", partition=user_paused)
    await engine.tick()
    assert [e.partition for e in recorder.take()] == [user_paused]


async def test_a_stopped_connector_lets_its_keys_go_and_refuses_operations_until_resumed(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    stored = dict(store.states)

    await engine.control("invoices", "stop")

    assert engine.target("invoices") == "STOPPED"
    assert engine.inspect() == []
    assert store.states == stored  # nothing written: state kept as it was
    before = requests(env)
    env.clock.advance(3600)
    await engine.tick()
    assert requests(env) == before
    for operation in (
        engine.trigger("invoices", partition=env.tid(0)),
        engine.backfill("invoices", partition=env.tid(0)),
        engine.parked.retry("invoices", [], partition=env.tid(0)),
    ):
        with pytest.raises(Conflict, match=r"connector 'invoices' is STOPPED.*resume it first"):
            await operation
    assert store.states == stored

    changed = env.sim.update_item(env.tid(2), env.sim.items(env.tid(2))[0]["id"], amount=4.0)
    await engine.control("invoices", "resume")
    assert engine.target("invoices") == "RUNNING"
    assert set(inspected(engine)) == {t.id for t in env.tenants}
    await engine.tick()
    assert [(e.partition, e.subject, e.sequence) for e in recorder.take()] == [
        (env.tid(2), changed["id"], 11)
    ]


async def test_a_target_is_one_of_three_and_a_connector_operation_one_of_four(
    engine: Engine,
) -> None:
    with pytest.raises(ConfigError, match="must be one of: RUNNING, PAUSED, STOPPED") as raised:
        await engine.set_target("invoices", "HALTED")
    assert raised.value.path == "target"
    with pytest.raises(ConfigError, match="unknown connector operation 'halt'"):
        await engine.control("invoices", "halt")
    with pytest.raises(ConfigError, match="unknown poller 'nope'"):
        await engine.set_target("nope", "PAUSED")
    assert engine.target("invoices") == "RUNNING"


async def test_a_poller_may_be_added_stopped_and_restart_reloads_its_keys(
    env: Env, store: MemoryStore
) -> None:
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.tick()
    await engine.add_poller(env.make_poller(name="orders"), target="STOPPED")
    assert inspected(engine, "orders") == {}
    before = requests(env)
    await engine.tick()
    assert requests(env) == before  # orders polled nothing

    # A restart holds the keys again from what is stored, not from what it held.
    tenant = env.tid(0)
    store.states[key(tenant)] = replace(store.states[key(tenant)], live=LaneState(AFTER_HISTORY))
    await engine.restart("invoices")
    assert set(inspected(engine)) == {t.id for t in env.tenants}
    sent = env.sim.request_count(tenant)
    await engine.trigger("invoices", partition=tenant)
    await engine.tick()
    assert env.sim.log(tenant)[sent].query.get("cursor") == AFTER_HISTORY
    await engine.restart("orders")  # stopped: stays stopped
    assert inspected(engine, "orders") == {}


# -- offsets -----------------------------------------------------------------------------------


async def test_offsets_list_each_stored_key_in_kip_875s_shape(env: Env, engine: Engine) -> None:
    assert engine.offsets.list("invoices") == []  # nothing stored before the first poll
    await engine.tick()
    offsets = engine.offsets.list("invoices")
    assert [o["partition"] for o in offsets] == [
        {"key": t} for t in sorted(env.tid(i) for i in range(3))
    ]
    assert {tuple(o["offset"]) for o in offsets} == {("live", "backfill", "reconcile")}
    assert all(o["offset"]["live"] is not None for o in offsets)
    assert all(o["offset"]["backfill"] is None for o in offsets)
    with pytest.raises(ConfigError, match="unknown poller 'nope'"):
        engine.offsets.list("nope")


async def test_offsets_change_only_while_stopped(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    await engine.tick()
    stored = dict(store.states)
    entry = [{"partition": {"key": env.tid(0)}, "offset": None}]
    for target in ("RUNNING", "PAUSED"):
        await engine.set_target("invoices", target)
        with pytest.raises(Conflict, match=f"connector 'invoices' is {target}; stop it first"):
            await engine.offsets.alter("invoices", entry)
    assert store.states == stored


async def test_a_reset_offset_starts_the_key_over_and_a_set_one_moves_its_cursor(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    originals = {t.id: recorder.of(t.id) for t in env.tenants}
    recorder.take()
    reset, moved = env.tid(0), env.tid(1)
    moved_cursor = engine.offsets.list("invoices")[0]["offset"]["live"]  # some tenant's token
    await engine.set_target("invoices", "STOPPED")

    await engine.offsets.alter(
        "invoices",
        [
            {"partition": {"key": reset}, "offset": None},
            {"partition": {"key": moved}, "offset": {"live": None, "backfill": "b-1"}},
        ],
    )

    assert store.snapshots[key(reset)] == {}
    assert store.states[key(reset)].sequence == 10  # sequence numbers are never reused
    assert store.states[key(moved)].backfill.cursor == "b-1"
    assert len(store.snapshots[key(moved)]) == 10  # only a reset forgets what was seen
    by_key = {o["partition"]["key"]: o["offset"] for o in engine.offsets.list("invoices")}
    assert by_key[reset] == {"live": None, "backfill": None, "reconcile": None}
    assert by_key[moved]["live"] is None and by_key[moved]["backfill"] == "b-1"
    assert moved_cursor is not None

    await engine.set_target("invoices", "RUNNING")
    await engine.tick()
    again = recorder.of(reset)
    assert [(e.type, e.sequence) for e in again] == [("created", n) for n in range(11, 21)]
    assert [e.id for e in again] == [e.id for e in originals[reset]]
    assert recorder.of(moved) == []  # re-read from the start, all already seen


async def test_offsets_of_a_key_never_stored_create_its_state(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    await engine.set_target("invoices", "STOPPED")
    await engine.offsets.alter(
        "invoices", [{"partition": {"key": env.tid(2)}, "offset": {"live": "tok"}}]
    )
    assert store.states[key(env.tid(2))].live.cursor == "tok"
    assert store.states[key(env.tid(2))].sequence == 0
    assert engine.offsets.list("invoices") == [
        {
            "partition": {"key": env.tid(2)},
            "offset": {"live": "tok", "backfill": None, "reconcile": None},
        }
    ]


async def test_bad_offsets_are_refused_whole_naming_the_field(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    await engine.tick()
    await engine.set_target("invoices", "STOPPED")
    stored = dict(store.states)
    with pytest.raises(ConfigError, match="did you mean 'live'") as raised:
        await engine.offsets.alter(
            "invoices",
            [
                {"partition": {"key": env.tid(0)}, "offset": None},
                {"partition": {"key": env.tid(1)}, "offset": {"lvie": 1}},
            ],
        )
    assert raised.value.path == "offsets[1].offset.lvie"
    assert store.states == stored  # the first, valid entry was not applied either


# -- operations by name, and as commands ---------------------------------------------------------


async def test_operate_takes_the_json_form_of_any_key_operation(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    await engine.tick()
    tenant = env.tid(0)
    await engine.operate("backfill", "invoices", partition=tenant, args={"from": "c-0"})
    assert store.states[key(tenant)].backfill.cursor == "c-0"
    await engine.operate("reset", "invoices", partition=tenant, args={"to": "c-9"})
    assert store.states[key(tenant)].live.cursor == "c-9"
    with pytest.raises(ConfigError, match="unknown argument; did you mean 'from'") as raised:
        await engine.operate("replay", "invoices", partition=tenant, args={"frm": 1})
    assert raised.value.path == "frm"
    with pytest.raises(ConfigError, match="unknown operation 'zap'"):
        await engine.operate("zap", "invoices", partition=tenant)


class PeerStore(MemoryStore):
    """The memory store as one of several instances: it owns only the keys ``owned`` lists,
    keeps the commands sent to other owners, hands over the commands it is given, and keeps
    the command records each commit tombstones."""

    def __init__(self, owned: set[str] | None = None) -> None:
        super().__init__()
        self.owned = owned
        self.sent: list[Command] = []
        self.inbox: list[Command] = []
        self.tombstoned: list[str] = []

    def owns(self, poller: str, partition: str) -> bool:
        return self.owned is None or f"{poller}/{partition}" in self.owned

    def take_commands(self) -> list[Command]:
        taken, self.inbox = self.inbox, []
        return taken

    async def send_command(self, command: Command) -> None:
        self.sent.append(command)

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        await super().commit(batch)
        for entry in batch:
            self.tombstoned.extend(entry.commands)


async def test_an_operation_on_another_owners_key_is_sent_in_its_json_form(env: Env) -> None:
    mine = env.tid(0)
    store = PeerStore(owned={key(mine)})
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.tick()
    theirs = env.tid(1)

    await engine.replay("invoices", from_="2026-09-01T00:00:00Z", partition=theirs)
    assert await engine.parked.retry("invoices", iter(["p1", "p2"]), partition=theirs) == []

    assert [(c.op, c.poller, c.partition, c.args) for c in store.sent] == [
        ("replay", "invoices", theirs, {"from": "2026-09-01T00:00:00Z"}),
        ("retry", "invoices", theirs, {"ids": ["p1", "p2"]}),
    ]
    assert key(theirs) not in store.states  # nothing applied here


async def test_a_retry_command_is_applied_once_by_the_owner(env: Env) -> None:
    bad = env.tid(1)
    target = env.sim.items(bad)[4]
    fixed = False

    def identity(item: dict[str, Any]) -> str:
        if "id" not in item and fixed:
            return f"created:{item['created_at']}"
        return item["id"]

    store = PeerStore()
    poller = env.make_poller(
        identity=identity, fetch=strip_id_of(env.token_fetch(3), bad, target["id"])
    )
    engine = env.make_engine(poller, store=store)
    recorder = env.recorder(engine)
    await engine.tick()
    (parked,) = await engine.parked.list("invoices", partition=bad)
    recorder.take()

    fixed = True
    args = KEY_OPERATIONS["retry"].encode({"ids": [parked.id]})
    command = Command("c1", "retry", "invoices", bad, args, env.clock.now())
    store.inbox.append(command)
    await engine.tick()

    assert await engine.parked.list("invoices", partition=bad) == []
    (recovered,) = recorder.take()
    assert (recovered.partition, recovered.type, recovered.sequence) == (bad, "created", 10)
    assert store.tombstoned == ["c1"]

    # Delivered again (its tombstone lost in a crash): the item is gone, nothing happens twice.
    store.inbox.append(command)
    await engine.tick()
    assert recorder.take() == []
    assert store.tombstoned == ["c1"] * 2


async def test_a_command_that_does_not_fit_is_logged_not_applied(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    store = PeerStore()
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.tick()
    tenant = env.tid(0)
    stored = dict(store.states)
    store.inbox.extend(
        [
            Command("c1", "backfill", "invoices", tenant, {"from": 1, "x": 2}, 0.0),
            Command("c2", "alter_offsets", "invoices", tenant, {"offset": None}, 0.0),
        ]
    )
    await engine.tick()
    assert store.states == stored and store.tombstoned == []
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        re.search(r"command backfill c1 not applied: args\.x: unknown argument", m)
        for m in messages
    )
    assert any(
        re.search(r"command alter_offsets c2 not applied: .*stop it first", m) for m in messages
    )


async def test_reset_offsets_starts_every_key_over_only_while_stopped(
    env: Env, engine: Engine, store: MemoryStore
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    with pytest.raises(Conflict, match="stop it first"):
        await engine.offsets.reset("invoices")

    await engine.set_target("invoices", "STOPPED")
    await engine.offsets.reset("invoices")
    assert all(store.snapshots[key(t.id)] == {} for t in env.tenants)

    await engine.set_target("invoices", "RUNNING")
    await engine.tick()
    for tenant in env.tenants:
        again = recorder.of(tenant.id)
        assert [(e.type, e.sequence) for e in again] == [("created", n) for n in range(11, 21)]


async def test_offsets_of_another_owners_keys_are_sent_to_it(env: Env) -> None:
    mine, theirs = env.tid(0), env.tid(1)
    store = PeerStore(owned={key(mine)})
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.tick()
    await engine.set_target("invoices", "STOPPED")

    await engine.offsets.alter(
        "invoices",
        [
            {"partition": {"key": mine}, "offset": {"live": "m"}},
            {"partition": {"key": theirs}, "offset": {"live": "t"}},
            {"partition": {"key": "never-listed"}, "offset": None},
        ],
    )

    assert store.states[key(mine)].live.cursor == "m"
    assert [(c.op, c.partition, c.args) for c in store.sent] == [
        ("alter_offsets", theirs, {"offset": {"live": "t"}}),
        ("alter_offsets", "never-listed", {"offset": None}),
    ]
    assert key(theirs) not in store.states


# -- the lifecycle's fenced path --------------------------------------------------------------


async def test_a_fenced_key_is_let_go_and_held_again_if_still_ours(
    env: Env, engine: Engine, store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    tenant = env.tid(0)
    # Another owner took the key over meanwhile: the stored epoch moved on.
    store.states[key(tenant)] = replace(store.states[key(tenant)], epoch=7)
    changed = env.sim.update_item(tenant, env.sim.items(tenant)[2]["id"], amount=6.0)
    env.clock.advance(900)

    await engine.tick()

    assert tenant not in inspected(engine)  # let go: its page was not committed
    assert recorder.of(tenant) == []
    assert store.states[key(tenant)].epoch == 7
    assert any(
        "fenced by another owner; letting the key go" in r.getMessage() for r in caplog.records
    )

    await engine.tick()  # still ours (the memory store owns every key): restored, polled

    assert tenant in inspected(engine)
    assert [(e.subject, e.sequence) for e in recorder.of(tenant)] == [(changed["id"], 11)]
    assert store.states[key(tenant)].epoch == 7


async def test_a_command_for_a_key_not_held_yet_is_applied_once_the_key_is(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    # Another instance answered 202 for a tenant this one has not listed yet (its listing is
    # a moment behind): the command waits for the key instead of being dropped.
    store = PeerStore()
    engine = env.make_engine(env.make_poller(partitions_refresh="10s"), store=store)
    await engine.tick()
    added = env.sim.add_tenant()
    store.inbox.append(Command("c1", "pause", "invoices", added.id, {}, 0.0))

    await engine.tick()
    assert added.id not in [i.partition for i in engine.inspect()]
    assert store.tombstoned == []  # not applied, not dropped either

    env.clock.advance(10)
    await engine.tick()  # the listing brings the key; the command is due again
    env.clock.advance(1)
    await engine.tick()

    (paused,) = [i for i in engine.inspect() if i.partition == added.id]
    assert paused.paused
    assert store.tombstoned == ["c1"]
    assert not any("not applied" in r.getMessage() for r in caplog.records)


async def test_a_command_whose_key_never_comes_is_given_up_and_left_in_kafka(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    store = PeerStore()
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.tick()
    store.inbox.append(Command("c2", "trigger", "invoices", "t_gone", {}, 0.0))
    await engine.tick()
    env.clock.advance(61)
    await engine.tick()

    assert store.tombstoned == []
    assert any(
        re.search(r"command trigger c2 not applied in 60s, left for the key's next owner", m)
        for m in (r.getMessage() for r in caplog.records)
    )


async def test_a_poller_removed_or_redefined_while_its_partitions_are_listed_is_left_alone(
    env: Env,
) -> None:
    """A REST DELETE or PUT lands while a scheduled refresh awaits a slow ``partitions()``:
    the refresh neither fails nor applies the stale listing to what replaced it."""
    listing, release = asyncio.Event(), asyncio.Event()

    async def slow_partitions() -> list[dict[str, Any]]:
        listing.set()
        await release.wait()
        return env.partitions()

    engine = env.make_engine(
        env.make_poller(name="orders", partitions=slow_partitions), env.make_poller()
    )
    refreshing = asyncio.create_task(engine.tick())
    await listing.wait()
    env.hidden.add(env.tid(0))  # the redefinition lists one tenant fewer than the stale one
    await engine.remove_poller("invoices")
    await engine.remove_poller("orders")
    await engine.add_poller(env.make_poller(name="orders"))
    release.set()
    await refreshing

    assert sorted(engine.pollers) == ["orders"]
    held = inspected(engine, "orders")
    assert set(held) == {t.id for t in env.tenants[1:]}
    assert not any(key.paused for key in held.values())


async def test_a_trigger_committing_as_its_connector_is_redefined_and_ownership_moves_is_kept(
    env: Env,
) -> None:
    """A connector redefined while a trigger of one of its keys waits for its commit, and a
    rebalance meanwhile (the engine follows ownership while the redefinition waits for that
    commit): the key polls once, as triggered, and every key under the new definition.
    Before, the pass over ownership held the keys again from the old definition's listing,
    the triggered one with its state from before the trigger's commit (due in ten minutes),
    and the new definition found them held: the trigger was lost (the rest-fire fault
    scenario, CI, stop 54), and the others kept polling as the old definition said."""
    store = HeldCommits()
    slow = {"min": "10m", "max": "1h"}
    engine = env.make_engine(env.make_poller(schedule=slow), store=store)
    await engine.tick()
    tenant = env.tid(0)
    requests = env.sim.request_count(tenant)
    store.hold(lambda entry: entry.state.partition == tenant)
    triggering = asyncio.create_task(engine.trigger("invoices", partition=tenant))
    await asyncio.wait_for(store.waiting.wait(), timeout=5)

    redefining = asyncio.create_task(engine.add_poller(env.make_poller(schedule=slow, limit=7)))
    await asyncio.sleep(0.01)  # its keys let go: it waits for the trigger's commit
    assert not redefining.done()
    store.moved()
    await engine.tick()
    store.release()
    await asyncio.wait_for(asyncio.gather(triggering, redefining), timeout=5)

    await engine.tick()
    assert env.sim.request_count(tenant) == requests + 1
    assert env.sim.log(tenant)[-1].query.get("limit") == "7"  # the new definition's request
    env.clock.advance(3600)
    await engine.tick()  # every key, held under the new definition: none under the old
    assert {env.sim.log(t.id)[-1].query.get("limit") for t in env.tenants} == {"7"}
