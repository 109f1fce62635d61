"""The replicas and settings of watukuy's topics as pure rules: three replicas with
``min.insync.replicas`` 2 on a production cluster, as many as there are brokers on a smaller
one, and an existing internal topic refused when its settings would lose stored state with a
broker (the real broker checks the rest in tests/integration/test_topics.py)."""

from __future__ import annotations

import pytest

from watukuy.core.errors import ConfigError
from watukuy.store.kafka.durability import Durability, check_internal, created_config, replicas_for

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("written", "brokers", "replicas"),
    [(None, 1, 1), (None, 2, 2), (None, 3, 3), (None, 5, 3), (1, 5, 1), (5, 5, 5), (2, 3, 2)],
)
def test_the_replication_factor_is_the_written_one_else_three_or_the_broker_count(
    written: int | None, brokers: int, replicas: int
) -> None:
    assert replicas_for(written, brokers) == replicas


def test_three_replicas_and_up_are_created_with_two_in_sync() -> None:
    assert created_config(1) == {} and created_config(2) == {}
    assert created_config(3) == {"min.insync.replicas": "2"}
    assert created_config(5) == {"min.insync.replicas": "2"}


def error_of(found: Durability, written: int | None, brokers: int) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        check_internal("w.state", found, written, brokers)
    return caught.value


def test_one_replica_on_a_production_cluster_needs_to_be_written_out() -> None:
    alone = Durability(replicas=1, min_insync=1, unclean_election=False)
    error = error_of(alone, None, 3)
    assert error.path == "topics.replication.factor"
    assert "topic 'w.state' has 1 replica on a cluster of 3 brokers" in str(error)
    assert "write topics.replication.factor: 1 to run it so" in str(error)
    check_internal("w.state", alone, 1, 3)  # written out: a deliberate choice
    check_internal("w.state", alone, None, 2)  # a small cluster: nothing better exists


def test_three_replicas_with_one_in_sync_are_refused_with_the_setting_to_change() -> None:
    error = error_of(Durability(3, 1, False), None, 3)
    assert str(error).endswith(
        "set it to 2 (kafka-configs.sh --alter --entity-type topics --entity-name w.state "
        "--add-config min.insync.replicas=2)"
    )
    check_internal("w.state", Durability(3, 2, False), None, 3)


def test_an_unclean_leader_election_is_refused_whatever_the_replicas() -> None:
    for replicas in (1, 3):
        assert "unclean.leader.election.enable=true" in str(
            error_of(Durability(replicas, 2, True), 1, 3)
        )


def test_what_the_cluster_says_is_read_with_kafkas_defaults() -> None:
    assert Durability.of(3, {}) == Durability(3, 1, False)
    found = {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    assert Durability.of(3, found) == Durability(3, 2, True)
