"""A key whose stored state a newer release wrote (a rolling upgrade) waits on this instance:
shown with why, never polled, never written, let go without a write; the other keys go on.

The Kafka store reports such a key by raising ``NewerRelease`` from ``load`` (see
tests/integration/test_rolling_upgrade.py for the real thing); here a memory store does the
same for the keys it is told.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.engine.support import Env
from watukuy import Event, MemoryStore
from watukuy.control.keystatus import key_status
from watukuy.core.errors import Conflict
from watukuy.core.poll import fresh_state
from watukuy.observe.metrics import PrometheusObserver
from watukuy.store.base import KeyCommit, NewerRelease, StoredKey

REFRESH = 300.0  # the default partitions_refresh
WHY = "unreadable PartitionState record: format_version 2 is newer than 1"


class UpgradedStore(MemoryStore):
    """A memory store holding some keys a newer release wrote: it cannot read them."""

    def __init__(self, newer: set[str]) -> None:
        super().__init__()
        self.newer = newer

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> StoredKey | None:
        if f"{poller}/{partition}" in self.newer:
            raise NewerRelease(WHY)
        return await super().load(poller, partition, snapshot=snapshot)


def key(partition: str) -> str:
    return f"invoices/{partition}"


def waiting_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not polled here" in r.getMessage()]


async def test_a_key_from_a_newer_release_waits_and_the_others_go_on(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    waits, runs = env.tid(0), env.tid(1)
    store = UpgradedStore({key(waits)})
    engine = env.make_engine(env.make_poller(), store=store)
    caplog.set_level(logging.WARNING)
    await engine.tick()
    env.clock.advance(3600)
    await engine.tick()

    assert env.sim.request_count(waits) == 0
    assert env.sim.request_count(runs) > 0
    assert key(waits) not in store.states  # nothing written over the newer value
    assert len(store.outbox["invoices"]) == 20  # the two others' items
    shown = {i.partition: i for i in engine.inspect()}
    assert set(shown) == {t.id for t in env.tenants}
    assert shown[waits].last_error == (
        f"waits for a newer release of watukuy to read its stored state: {WHY}"
    )
    assert shown[waits].next_due is None
    assert waiting_lines(caplog) == [f"{key(waits)}: {shown[waits].last_error}; not polled here"]
    for operation in (engine.trigger, engine.pause, engine.reconcile):
        with pytest.raises(Conflict, match="newer release"):
            await operation("invoices", partition=waits)
    assert key(waits) not in store.states


async def test_a_waiting_key_is_shown_unassigned_by_its_owner_and_not_counted_as_held(
    env: Env,
) -> None:
    """What users read: its status (Connect's UNASSIGNED, owned here, with why) and the
    metrics (a waiting key, not a held one), from the same engine."""
    waits, runs = env.tid(0), env.tid(1)
    engine = env.make_engine(env.make_poller(), store=UpgradedStore({key(waits)}), owner="r1")
    await engine.tick()

    shown = {i.partition: i for i in engine.inspect()}
    assert shown[waits].waiting_newer and not shown[runs].waiting_newer
    statuses = {i.partition: key_status(i, now=env.clock.now()) for i in engine.inspect()}
    assert (statuses[waits].state, statuses[waits].owner) == ("UNASSIGNED", "r1")
    assert statuses[waits].last_error == shown[waits].last_error
    assert "newer release" in (statuses[waits].last_error or "")
    assert statuses[runs].state == "RUNNING"

    metrics = PrometheusObserver(process=False)
    metrics.watch(engine.figures.table)
    body = metrics.render()[0].decode()
    named = 'connector="invoices",poller="invoices",stream=""'
    assert f"watukuy_owned_keys{{{named}}} 2.0" in body
    assert f"watukuy_waiting_keys{{{named}}} 1.0" in body
    assert f'partition="{waits}"' not in body


async def test_one_line_a_minute_names_one_key_and_counts_the_others(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    store = UpgradedStore({key(env.tid(0)), key(env.tid(1))})
    engine = env.make_engine(env.make_poller(), store=store)
    caplog.set_level(logging.WARNING)
    await engine.tick()
    assert len(waiting_lines(caplog)) == 1

    added = env.sim.add_tenant()
    store.newer.add(key(added.id))
    env.clock.advance(REFRESH)
    await engine.tick()
    lines = waiting_lines(caplog)
    assert len(lines) == 2
    assert lines[1].startswith(f"{key(added.id)}: waits for a newer release")
    assert lines[1].endswith(
        "not polled here (1 other key(s) began waiting since the last such line)"
    )


async def test_a_waiting_key_is_let_go_without_a_write(env: Env) -> None:
    unlisted, deleted = env.tid(0), env.tid(1)
    store = UpgradedStore({key(unlisted), key(deleted)})
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.tick()
    commits = store.commits

    env.hidden.add(unlisted)  # the partitions source no longer lists it
    env.clock.advance(REFRESH)
    await engine.tick()
    assert unlisted not in [i.partition for i in engine.inspect()]
    assert key(unlisted) not in store.states  # no "removed" pause written over it

    await engine.partitions.remove("invoices", deleted)  # a user deletes it: that is allowed
    assert deleted not in [i.partition for i in engine.inspect()]
    assert store.commits == commits + 1  # only the poll of the one readable key

    await engine.set_target("invoices", "STOPPED")
    assert engine.inspect() == []


async def test_a_poison_event_of_a_waiting_key_is_not_parked_here(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Its parked records are the newer release's to write: the event goes where an event
    of a key held elsewhere goes (the memory store has no DLQ: a log line)."""
    waits = env.tid(0)
    store = UpgradedStore({key(waits)})
    engine = env.make_engine(env.make_poller(handler={"attempts": 1}), store=store)

    async def handler(event: Event, ctx: Any) -> None:
        if event.partition == waits:
            raise RuntimeError("the warehouse rejected it")

    engine.on("invoices", handler)
    await engine.tick()
    # An event of the key, as the instance that reads its state would have committed it.
    newer = replace(fresh_state(engine.pollers["invoices"], waits, 0.0), sequence=1)
    event = Event(
        "e1", "invoices", waits, "it_1", "created", "v1", 1, datetime.now(UTC), "live", 1, {}
    )
    await store.commit([KeyCommit(state=newer, events=[event], fenced=False)])
    caplog.set_level(logging.WARNING)
    await engine.tick()

    assert store.parked[key(waits)] == {}
    assert f"{key(waits)}: cannot park event #1, key not held" in caplog.messages
