"""Topic creation and checking against the real broker, and murmur2 agreement with librdkafka."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from watukuy.core.errors import ConfigError
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.topics import BrokerUnavailable, TopicLayout, ensure_topics

PARTITIONS = 3


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def prefix(admin: AdminClient) -> Iterator[str]:
    """A fresh topic prefix; every topic starting with it is deleted afterwards."""
    value = f"wt{uuid.uuid4().hex[:10]}"
    yield value
    names = [name for name in admin.list_topics(timeout=30).topics if name.startswith(value)]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(Exception):
                future.result(timeout=30)


def create(admin: AdminClient, name: str, partitions: int, policy: str) -> None:
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1, config={"cleanup.policy": policy})], operation_timeout=30
    )
    futures[name].result(timeout=30)


def policy_of(admin: AdminClient, name: str) -> str:
    [future] = admin.describe_configs([ConfigResource("topic", name)]).values()
    return str(future.result(timeout=30)["cleanup.policy"].value)


def test_creates_internal_topics_compacted_and_poller_topics_with_delete(
    admin: AdminClient, prefix: str, kafka_bootstrap: str
) -> None:
    layout = TopicLayout(prefix, PARTITIONS, 1)
    infos = ensure_topics(admin, layout, [("invoices", None), ("tickets", None)])

    internal = [f"{prefix}.{n}" for n in ("state", "items", "parked", "configs", "status")]
    internal.append(f"{prefix}.schemas")
    assert layout.internal() == internal
    poller_topics = [
        f"{prefix}.events.invoices",
        f"{prefix}.dlq.invoices",
        f"{prefix}.events.tickets",
        f"{prefix}.dlq.tickets",
    ]
    assert sorted(infos) == sorted(internal + poller_topics)
    existing = admin.list_topics(timeout=30).topics
    for name in internal:
        assert infos[name].cleanup_policy == "compact"
        assert policy_of(admin, name) == "compact"
        assert len(existing[name].partitions) == PARTITIONS
    for name in poller_topics:
        assert infos[name].cleanup_policy == "delete"
        assert policy_of(admin, name) == "delete"
        assert len(existing[name].partitions) == PARTITIONS
    for info in infos.values():
        assert info.partitions == PARTITIONS
        assert info.max_message_bytes > 100_000  # the broker default is about 1 MB


def test_second_call_is_idempotent(admin: AdminClient, prefix: str) -> None:
    layout = TopicLayout(prefix, PARTITIONS, 1)
    pollers = [("invoices", None)]
    first = ensure_topics(admin, layout, pollers)
    second = ensure_topics(admin, layout, pollers)
    assert first == second


def test_concurrent_creators_both_succeed(admin: AdminClient, prefix: str) -> None:
    layout = TopicLayout(prefix, PARTITIONS, 1)
    results: list[object] = []

    def run() -> None:
        try:
            results.append(ensure_topics(admin, layout, [("invoices", None)]))
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 3
    assert all(isinstance(r, dict) and len(r) == 8 for r in results), results


def test_existing_state_topic_with_other_partition_count_is_refused(
    admin: AdminClient, prefix: str
) -> None:
    create(admin, f"{prefix}.state", 2, "compact")
    with pytest.raises(ConfigError) as caught:
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("invoices", None)])
    assert caught.value.path == "topics.partitions"
    message = str(caught.value)
    assert f"topic '{prefix}.state' has 2 partitions" in message
    assert f"topics.partitions is {PARTITIONS}" in message
    assert "\n" not in message


def test_items_not_co_partitioned_with_state_is_refused(admin: AdminClient, prefix: str) -> None:
    create(admin, f"{prefix}.items", PARTITIONS + 1, "compact")
    with pytest.raises(ConfigError) as caught:
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [])
    assert caught.value.path == "topics.partitions"
    assert f"'{prefix}.items' has {PARTITIONS + 1} partitions" in str(caught.value)
    assert "co-partitioned" in str(caught.value)


def test_existing_items_topic_with_delete_policy_is_refused(
    admin: AdminClient, prefix: str
) -> None:
    create(admin, f"{prefix}.items", PARTITIONS, "delete")
    with pytest.raises(ConfigError) as caught:
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("invoices", None)])
    assert caught.value.path == "topics.prefix"
    assert f"topic '{prefix}.items' has cleanup.policy=delete" in str(caught.value)
    assert "compact" in str(caught.value)


def test_internal_topic_with_compact_and_delete_is_refused(admin: AdminClient, prefix: str) -> None:
    create(admin, f"{prefix}.parked", PARTITIONS, "compact,delete")
    expected = rf"'{prefix}\.parked' has cleanup\.policy=compact,delete"
    with pytest.raises(ConfigError, match=expected):
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [])


def test_existing_compacted_events_topic_is_refused(admin: AdminClient, prefix: str) -> None:
    create(admin, f"{prefix}.events.invoices", 5, "compact")
    with pytest.raises(ConfigError) as caught:
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("invoices", None)])
    assert caught.value.path == "topics.prefix"
    assert f"topic '{prefix}.events.invoices' has cleanup.policy=compact" in str(caught.value)


def test_events_topic_with_other_partition_count_is_accepted(
    admin: AdminClient, prefix: str
) -> None:
    create(admin, f"{prefix}.events.invoices", 5, "delete")
    create(admin, f"{prefix}.dlq.invoices", 1, "delete")
    infos = ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("invoices", None)])
    assert infos[f"{prefix}.events.invoices"].partitions == 5
    assert infos[f"{prefix}.dlq.invoices"].partitions == 1


def test_poller_topic_override_is_honoured(admin: AdminClient, prefix: str) -> None:
    custom = f"{prefix}-billing-events"
    layout = TopicLayout(prefix, PARTITIONS, 1)
    infos = ensure_topics(admin, layout, [("tickets", None), ("invoices", custom)])
    assert layout.events("invoices", custom) == custom
    assert infos[custom].cleanup_policy == "delete"
    assert f"{prefix}.dlq.invoices" in infos
    existing = admin.list_topics(timeout=30).topics
    assert custom in existing
    assert f"{prefix}.events.invoices" not in existing
    assert f"{prefix}.events.tickets" in existing


def test_compacted_override_is_refused_naming_the_poller_setting(
    admin: AdminClient, prefix: str
) -> None:
    custom = f"{prefix}-billing-events"
    create(admin, custom, 1, "compact")
    with pytest.raises(ConfigError) as caught:
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("a", None), ("b", custom)])
    assert caught.value.path == "pollers[1].topic"
    assert f"'{custom}'" in str(caught.value)


def test_override_that_is_an_internal_topic_is_refused(admin: AdminClient, prefix: str) -> None:
    with pytest.raises(ConfigError, match="which is also an internal topic"):
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("a", f"{prefix}.state")])
    assert admin.list_topics(timeout=30).topics.keys().isdisjoint({f"{prefix}.state"})


def test_replication_factor_above_broker_count_is_a_config_error(
    admin: AdminClient, prefix: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 3), [("invoices", None)])
    assert caught.value.path == "topics.replication.factor"
    assert "only 1 broker" in str(caught.value)


def test_unreachable_broker_is_reported_quickly() -> None:
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable) as caught:
        ensure_topics(
            admin,
            TopicLayout("watukuy", PARTITIONS, 1),
            [("invoices", None)],
            timeout=3.0,
            bootstrap="127.0.0.1:1",
        )
    assert time.monotonic() - started < 15
    assert str(caught.value).startswith("cannot reach Kafka at 127.0.0.1:1: ")


def test_librdkafka_murmur2_random_agrees_with_partition_for(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("murmur", partitions=7)
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random", "linger.ms": 5}
    )
    landed: dict[str, int] = {}
    errors: list[object] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            landed[msg.key().decode()] = msg.partition()  # type: ignore[attr-defined]

    keys = [f"invoices/t_{i}" for i in range(40)] + [f"tickets/acme-{i}" for i in range(10)]
    keys += ["", "a", "ab", "abc", "vendor/ñandú-ü"]  # every tail length, and UTF-8
    for key in keys:
        producer.produce(topic, key=key.encode("utf-8"), value=b"x", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert errors == []
    assert landed == {key: partition_for(key, 7) for key in keys}
    assert len(set(landed.values())) == 7  # the keys really spread over the partitions


def test_events_topic_with_compact_and_delete_is_refused(admin: AdminClient, prefix: str) -> None:
    # "compact,delete" still compacts: events sharing a key (poller/partition) would be dropped.
    create(admin, f"{prefix}.events.invoices", PARTITIONS, "compact,delete")
    expected = r"has cleanup\.policy=compact,delete but an events topic"
    with pytest.raises(ConfigError, match=expected):
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("invoices", None)])


def test_left_out_the_replication_factor_is_what_the_cluster_can_hold(
    admin: AdminClient, prefix: str
) -> None:
    # One broker here: one replica and no min.insync.replicas of our own (three brokers and
    # more get three and 2, which the durability unit tests pin).
    infos = ensure_topics(admin, TopicLayout(prefix, PARTITIONS, None), [("invoices", None)])
    state = infos[f"{prefix}.state"].durability
    assert state is not None and (state.replicas, state.min_insync) == (1, 1)
    assert not state.unclean_election


def test_an_internal_topic_that_could_elect_an_unclean_leader_stops_the_start(
    admin: AdminClient, prefix: str
) -> None:
    name = f"{prefix}.state"
    config = {"cleanup.policy": "compact", "unclean.leader.election.enable": "true"}
    admin.create_topics([NewTopic(name, PARTITIONS, 1, config=config)])[name].result(timeout=30)
    with pytest.raises(ConfigError) as caught:
        ensure_topics(admin, TopicLayout(prefix, PARTITIONS, None), [("invoices", None)])
    assert str(caught.value) == (
        f"topics.prefix: topic '{name}' has unclean.leader.election.enable=true: a replica "
        "that missed writes could become leader and drop stored state; set it back "
        f"(kafka-configs.sh --alter --entity-type topics --entity-name {name} --add-config "
        "unclean.leader.election.enable=false)"
    )
