"""watukuy on a three-node Kafka cluster (``integration/kafka/cluster.py``), the shape of
production: its topics get three replicas with two in sync, and a runner's keys publish every
item exactly once, in sequence, while the leader of a state partition is SIGKILLed, then the
node coordinating the runner's transactions, then a node is stopped cleanly. Kafka's own
transactions system test does the same with its copier; here the store is the copier.

The cluster is this module's own (started once, about 25 s on this machine, stopped after).
The bounces run with the default 10 s session and with 6 s: with 6 s, the SIGKILL of the node
coordinating its group and transactions once cost the store its group membership and, in two
runs of four, it then published nothing for 90 s (docs/status.md says what fixed it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from integration.faults.verify import settle_transactions
from integration.kafka import cluster as kafka_cluster
from integration.kafka.tools import transactions
from tests.integration.kafka_support import (
    delete_prefix,
    make_store,
    read_topic,
    unique_prefix,
    wait_owned,
)
from watukuy import Engine, FetchResult, Partition, define_poller
from watukuy.core.errors import ConfigError
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

pytestmark = pytest.mark.cluster

TENANTS = [f"t{i}" for i in range(6)]
PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_cluster.RunningCluster]:
    runtime = tmp_path_factory.mktemp("cluster")
    started = kafka_cluster.start(Path(runtime), nodes=3)
    try:
        yield started
    finally:
        kafka_cluster.stop(Path(runtime))


def test_topics_get_three_replicas_two_in_sync_and_one_replica_is_refused(
    cluster: kafka_cluster.RunningCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    prefix = unique_prefix()
    try:
        infos = ensure_topics(admin, TopicLayout(prefix, PARTITIONS, None), [("invoices", None)])
        for name in (f"{prefix}.state", f"{prefix}.events.invoices"):
            found = infos[name].durability
            assert found is not None and (found.replicas, found.min_insync) == (3, 2), name

        other = unique_prefix()  # an internal topic made by hand with one replica
        new = NewTopic(f"{other}.state", PARTITIONS, 1, config={"cleanup.policy": "compact"})
        admin.create_topics([new])[f"{other}.state"].result(timeout=30)
        with pytest.raises(ConfigError) as caught:
            ensure_topics(admin, TopicLayout(other, PARTITIONS, None), [("invoices", None)])
        assert caught.value.path == "topics.replication.factor"
        assert f"topic '{other}.state' has 1 replica on a cluster of 3 brokers" in str(caught.value)
        ensure_topics(admin, TopicLayout(other, PARTITIONS, 1), [("invoices", None)])  # written
    finally:
        delete_prefix(cluster.bootstrap, prefix)
        delete_prefix(cluster.bootstrap, other)


class Vendor:
    """Items ``<tenant>-<n>`` for n below ``limit``, five a page, read from a token cursor."""

    def __init__(self) -> None:
        self.limit = 0

    async def fetch(self, ctx: Any) -> FetchResult:
        start = int(ctx.cursor.value or 0)
        end = min(start + 5, self.limit)
        items = [{"id": f"{ctx.partition.key}-{n}"} for n in range(start, end)]
        return FetchResult(items=items, cursor=str(end), has_more=end < self.limit)


@contextlib.asynccontextmanager
async def running(engine: Engine) -> AsyncIterator[None]:
    async def ticking() -> None:
        while True:
            await engine.tick()
            await asyncio.sleep(0.05)

    async with asyncio.TaskGroup() as group:
        task = group.create_task(ticking())
        try:
            yield
        finally:
            task.cancel()


async def published(bootstrap: str, topic: str, count: int) -> None:
    """Until ``count`` events are visible to a read_committed reader (the caller bounds it)."""
    while True:
        read = await asyncio.to_thread(read_topic, bootstrap, topic, idle=1.0)
        if len(read.ids()) >= count:
            return
        await asyncio.sleep(1)


@pytest.mark.parametrize("session", [10.0, 6.0], ids=["session-10s", "session-6s"])
async def test_every_item_once_in_sequence_through_broker_bounces(
    cluster: kafka_cluster.RunningCluster, session: float
) -> None:
    vendor, prefix = Vendor(), unique_prefix()
    poller = define_poller(
        name="items",
        partitions=lambda: [Partition(t) for t in TENANTS],
        identity=lambda item: item["id"],
        fetch=vendor.fetch,
        schedule={"min": "100ms", "max": "200ms"},
    )
    store = make_store(
        cluster.bootstrap,
        prefix,
        "r1",
        partitions=PARTITIONS,
        replication_factor=None,
        session_timeout=session,
        transaction_timeout=session,
    )
    engine = Engine([poller], store=store)
    topic = f"{prefix}.events.items"
    await engine.__aenter__()
    try:
        await wait_owned(store, PARTITIONS)
        async with running(engine):
            for step in range(4):
                vendor.limit += 40
                async with asyncio.timeout(90):
                    await published(cluster.bootstrap, topic, len(TENANTS) * vendor.limit)
                if step == 0:  # the leader of a state partition: SIGKILL, down 5 s
                    leader = await asyncio.to_thread(
                        kafka_cluster.leader_of, cluster, f"{prefix}.state", 0
                    )
                    cluster = await asyncio.to_thread(
                        kafka_cluster.bounce, cluster, leader, hard=True, down=5
                    )
                elif step == 1:  # the node coordinating the runner's transactions: SIGKILL
                    node = await asyncio.to_thread(_coordinator, cluster)
                    cluster = await asyncio.to_thread(
                        kafka_cluster.bounce, cluster, node, hard=True, down=5
                    )
                elif step == 2:  # a clean stop of another node
                    cluster = await asyncio.to_thread(kafka_cluster.bounce, cluster, 3, hard=False)
    finally:
        await engine.close()

    read = await asyncio.to_thread(read_topic, cluster.bootstrap, topic)
    expected = len(TENANTS) * vendor.limit
    assert len(read.ids()) == expected and len(set(read.ids())) == expected
    for tenant in TENANTS:
        assert read.sequences(f"items/{tenant}") == list(range(1, vendor.limit + 1))
    hanging = await asyncio.to_thread(
        settle_transactions, cluster.bootstrap, [topic, f"{prefix}.state"], 30
    )
    assert hanging == {}
    delete_prefix(cluster.bootstrap, prefix)


def _coordinator(cluster: kafka_cluster.RunningCluster) -> int:
    rows = [line.split() for line in transactions(cluster.bootstrap, "list").splitlines()[1:]]
    live = [cells[0] for cells in rows if cells and ".r1." in cells[0]]
    return kafka_cluster.coordinator_of(cluster, live[-1])
