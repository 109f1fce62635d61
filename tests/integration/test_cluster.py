"""watukuy on a three-node Kafka cluster (``integration/kafka/cluster.py``), the shape of
production: its topics get three replicas with two in sync, and an internal topic with one
replica stops the start unless that is written out.

The cluster is this module's own (started once, about 25 s on this machine, stopped after)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from integration.kafka import cluster as kafka_cluster
from tests.integration.kafka_support import delete_prefix, unique_prefix
from watukuy.core.errors import ConfigError
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

pytestmark = pytest.mark.cluster

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
    prefix, other = unique_prefix(), unique_prefix()
    try:
        infos = ensure_topics(admin, TopicLayout(prefix, PARTITIONS, None), [("invoices", None)])
        for name in (f"{prefix}.state", f"{prefix}.events.invoices"):
            found = infos[name].durability
            assert found is not None and (found.replicas, found.min_insync) == (3, 2), name

        # An internal topic made by hand with one replica.
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
