"""The local state store (``runner.state.dir``) on a real broker: a restart reads only what the
topics gained since, the picture is the one a restore from the topics gives, and a store that
is gone, or written for other topics, is rebuilt from them."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.engine.support import Env, simulated
from tests.integration.kafka_support import (
    delete_prefix,
    in_sequence,
    make_store,
    read_topic,
    unique_prefix,
    wait_owned,
)
from watukuy import Engine
from watukuy.control.status import StatusTopic
from watukuy.core.observe import Observer
from watukuy.store.kafka.local import state_path
from watukuy.store.kafka.store import KafkaStore


class Restores(Observer):
    def __init__(self) -> None:
        self.records = 0
        self.keys = 0

    def restore_done(self, kafka_partition: int, keys: int, records: int, seconds: float) -> None:
        self.records += records
        self.keys += keys


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with simulated(3, 40, 3) as environment:
        yield environment


@pytest.fixture
def prefix(kafka_bootstrap: str) -> AsyncIterator[str]:
    name = unique_prefix()
    yield name
    delete_prefix(kafka_bootstrap, name)


async def _run_once(
    env: Env, bootstrap: str, prefix: str, state_dir: Path | None, runner: str = "r1"
) -> Restores:
    """Start a runner, let every key poll once, stop it; what its restore read from Kafka."""
    restores = Restores()
    store = make_store(
        bootstrap,
        prefix,
        runner,
        observers=restores,
        state_dir=None if state_dir is None else str(state_dir),
    )
    engine: Engine = env.make_engine(env.make_poller(limit=10), store=store)
    await engine.__aenter__()
    try:
        await wait_owned(store, 4)
        await engine.tick()
    finally:
        await engine.close()
    return restores


async def test_a_restart_on_its_disk_reads_only_what_the_topics_gained_and_publishes_once(
    env: Env, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    first = await _run_once(env, kafka_bootstrap, prefix, tmp_path)
    cold = await _run_once(env, kafka_bootstrap, prefix, None, runner="r2")
    assert cold.records >= 120 + 3  # every item and state record, read from the topics
    assert first.records == 0  # a new prefix: nothing to read yet

    tenant = env.tenants[0]
    env.sim.update_item(tenant.id, env.sim.items(tenant.id)[0]["id"], amount=999)
    env.sim.create_item(tenant.id)
    env.clock.advance(60)
    warm = await _run_once(env, kafka_bootstrap, prefix, tmp_path)
    # What the disk held is not read again: at most the states written since it last read.
    assert warm.keys == 3
    assert warm.records < cold.records / 10

    read = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    key = f"invoices/{tenant.id}"
    assert read.count == 122  # nothing published twice: the snapshot came from the disk
    assert in_sequence(read.sequences(key))
    assert [v["type"] for v in read.by_key[key][-2:]] == ["updated", "created"]


async def test_entries_read_one_by_one_from_the_disk_are_those_a_whole_load_gives(
    env: Env, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    await _run_once(env, kafka_bootstrap, prefix, tmp_path)
    restores = Restores()
    store = make_store(kafka_bootstrap, prefix, "r1", observers=restores, state_dir=str(tmp_path))
    await store.start()
    try:
        await wait_owned(store, 4)
        assert restores.records < 40  # restarted on its disk: the entries are read there
        for tenant in env.tenants:
            identities = [item["id"] for item in env.sim.items(tenant.id)]
            read = store.entries("invoices", tenant.id, [*identities, "never-seen"])
            loaded = await store.load("invoices", tenant.id)
            assert loaded is not None and len(loaded.snapshot) == 40
            assert read == loaded.snapshot
    finally:
        await store.close()


async def test_a_store_deleted_under_a_running_runner_is_rebuilt_and_nothing_is_lost(
    env: Env, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    restores = Restores()
    store = make_store(kafka_bootstrap, prefix, "r1", observers=restores, state_dir=str(tmp_path))
    engine: Engine = env.make_engine(env.make_poller(limit=10), store=store)
    await engine.__aenter__()
    try:
        await wait_owned(store, 4)
        await engine.tick()
        shutil.rmtree(tmp_path)
        for tenant in env.tenants:
            env.sim.create_item(tenant.id)
        env.clock.advance(60)
        await engine.tick()
    finally:
        await engine.close()

    again = await _run_once(env, kafka_bootstrap, prefix, tmp_path)
    assert again.records >= 123 + 3  # the store was gone: everything read from the topics
    env.clock.advance(60)
    await _run_once(env, kafka_bootstrap, prefix, tmp_path)
    read = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert read.count == 123
    for tenant in env.tenants:
        assert in_sequence(read.sequences(f"invoices/{tenant.id}"))


async def test_a_store_written_for_other_topics_is_wiped_with_one_line_saying_why(
    env: Env,
    kafka_bootstrap: str,
    prefix: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _run_once(env, kafka_bootstrap, prefix, tmp_path)
    # The topics are deleted and made again: the same names, other topics.
    await asyncio.to_thread(delete_prefix, kafka_bootstrap, prefix)
    await asyncio.sleep(2)
    caplog.set_level(logging.WARNING, logger="watukuy.local")
    restores = await _run_once(env, kafka_bootstrap, prefix, tmp_path)
    wiped = [r.getMessage() for r in caplog.records if "wiped" in r.getMessage()]
    assert len(wiped) == 1
    assert str(state_path(tmp_path, prefix, "r1")) in wiped[0]
    assert "written for other topics" in wiped[0]
    assert restores.keys == 0  # nothing of the old topics came back from the disk
    read = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert read.count == 120  # the new topics got every item once


class PerPartition(Observer):
    def __init__(self) -> None:
        self.records: dict[int, int] = {}

    def restore_done(self, kafka_partition: int, keys: int, records: int, seconds: float) -> None:
        self.records[kafka_partition] = records


async def _takeover_reads(
    env: Env, bootstrap: str, prefix: str, state_dir: Path, replicas: int
) -> tuple[int, int]:
    """Two runners share the keys (r2 started first); r2 stops; how many records r1 read
    from the topics to take r2's partitions over, and how many those partitions hold."""
    seen = {name: PerPartition() for name in ("r1", "r2")}
    stores = {
        name: make_store(
            bootstrap,
            prefix,
            name,
            observers=seen[name],
            state_dir=str(state_dir),
            standby_replicas=replicas,
            session_timeout=6.0,
        )
        for name in ("r1", "r2")
    }
    engines = {
        name: env.make_engine(env.make_poller(limit=10), store=s) for name, s in stores.items()
    }
    # As a runner does: the heartbeats in the status topic say who owns what.
    statuses = {
        name: StatusTopic(
            {"bootstrap.servers": bootstrap},
            store.layout,
            runner_id=name,
            session_timeout=6.0,
            owned=store.owned_kafka_partitions,
        )
        for name, store in stores.items()
    }
    for name, store in stores.items():
        store.roster = statuses[name].owners
    try:
        # r2 first, alone: r1's store never holds r2's partitions but as their standby.
        await engines["r2"].__aenter__()
        await statuses["r2"].start()
        await wait_owned(stores["r2"], 4)
        await engines["r2"].tick()
        await engines["r1"].__aenter__()
        await statuses["r1"].start()
        await wait_shared(stores)
        for engine in engines.values():
            await engine.tick()
        moved = set(stores["r2"].owned_kafka_partitions())
        total = sum(seen["r2"].records.get(p, 0) for p in moved)
        if replicas:  # r1 reads r2's heartbeat, then keeps r2's partitions warm
            await wait_standbys(stores["r1"], len(moved))
        for engine in engines.values():  # more written to r2's partitions while r1 watches
            for tenant in env.tenants:
                env.sim.create_item(tenant.id)
            env.clock.advance(60)
            await engine.tick()
        await asyncio.sleep(2)
        seen["r1"].records.clear()
        await statuses.pop("r2").stop()
        await engines.pop("r2").close()
        await wait_owned(stores["r1"], 4)
        return sum(seen["r1"].records.get(p, 0) for p in moved), total
    finally:
        for status in statuses.values():
            await status.stop(clean=False)  # a no-op on one never started
        for engine in engines.values():
            await engine.close()


async def wait_standbys(store: KafkaStore, count: int) -> None:
    """Until ``store`` keeps ``count`` partitions warm and has read them to their ends (figures:
    there is no event to wait on)."""
    async with asyncio.timeout(30):
        while store.local_figures()[1] != (count, 0):  # noqa: ASYNC110
            await asyncio.sleep(0.1)


async def wait_shared(stores: dict[str, KafkaStore]) -> None:
    """Until the stores own every partition between them, each some."""
    shared = asyncio.Event()

    def check() -> None:
        owned = [s.owned_kafka_partitions() for s in stores.values()]
        if sum(map(len, owned)) == 4 and all(owned):
            shared.set()

    for store in stores.values():
        store.watch(check)
    check()
    async with asyncio.timeout(60):
        await shared.wait()


async def test_a_standby_makes_a_takeover_read_only_what_was_written_since(
    env: Env, kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefixes = [unique_prefix(), unique_prefix()]
    try:
        warm, _ = await _takeover_reads(env, kafka_bootstrap, prefixes[0], tmp_path / "a", 1)
        cold, _ = await _takeover_reads(env, kafka_bootstrap, prefixes[1], tmp_path / "b", 0)
    finally:
        for prefix in prefixes:
            delete_prefix(kafka_bootstrap, prefix)
    assert cold >= 40  # without a standby: every item record of r2's partitions, read again
    assert warm < cold / 4
