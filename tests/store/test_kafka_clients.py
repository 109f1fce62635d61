"""The Kafka clients' settings and logs (watukuy.store.kafka.clients), without a broker."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from tests.clock import ManualClock
from watukuy.config import KafkaProperties
from watukuy.store.kafka.clients import (
    COMMON_PROPERTIES,
    LOGGER_NAME,
    OWNED_PROPERTIES,
    RepeatFilter,
    group_config,
    librdkafka_logger,
    producer_config,
    tail_config,
    translated,
    unreachable,
)

pytestmark = pytest.mark.unit

USER = {"bootstrap.servers": "b:9092", "client.id": "me", "batch.size": 1000, "fetch.min.bytes": 2}


def _configs() -> dict[str, dict[str, object]]:
    return {
        "producer": producer_config(USER, transactional_id="g.r", transaction_timeout=10.0),
        "group": group_config(USER, group="g", session_timeout=10.0, instance_id="r"),
        "tail": tail_config(USER, group="g.tail.r"),
    }


@pytest.mark.parametrize("client", ["producer", "group", "tail"])
def test_every_property_watukuy_adds_is_in_the_owned_table(client: str) -> None:
    """So the config refuses each one, and a user's value is never silently replaced."""
    added = set(_configs()[client]) - set(USER)
    assert added <= set(OWNED_PROPERTIES), added - set(OWNED_PROPERTIES)


def test_the_user_properties_reach_the_clients_that_read_them() -> None:
    configs = _configs()
    assert configs["producer"]["client.id"] == configs["group"]["client.id"] == "me"
    assert configs["producer"]["batch.size"] == 1000 and "batch.size" not in configs["tail"]
    assert configs["tail"]["fetch.min.bytes"] == 2 and "fetch.min.bytes" not in configs["producer"]
    for config in configs.values():
        assert config["logger"] is logging.getLogger(LOGGER_NAME)


def test_group_settings_come_from_the_runner_settings() -> None:
    config = group_config({}, group="acme.runners", session_timeout=45.0, instance_id=None)
    assert config["session.timeout.ms"] == 45000
    assert config["heartbeat.interval.ms"] == 9000
    assert "group.instance.id" not in config  # runner.static.membership: false


# logger is the Python client's own setting, not librdkafka's
@pytest.mark.parametrize("name", [n for n in COMMON_PROPERTIES if n != "logger"])
def test_every_suggested_property_is_one_librdkafka_knows(name: str) -> None:
    for client in (Producer, Consumer):
        try:
            built = client({name: "1", "group.id": "g", "logger": logging.getLogger("quiet")})
        except KafkaException as exc:
            assert "No such configuration property" not in exc.args[0].str()
        else:
            if isinstance(built, Consumer):
                built.close()


# --- logs ------------------------------------------------------------------------------------


def _record(client: str, text: str, level: int = logging.ERROR) -> logging.LogRecord:
    # what confluent-kafka hands the logger
    return logging.LogRecord(
        LOGGER_NAME, level, "(librdkafka)", 0, "%s [%s] %s", ("FAIL", client, text), None
    )


REFUSED = (
    "[thrd:b:1/bootstrap]: b:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
    "Connection refused (after {ms}ms in state CONNECT)"
)


def test_the_same_message_shows_once_per_period_then_says_how_many_were_held() -> None:
    clock = ManualClock()
    repeats = RepeatFilter(period=30.0, clock=clock)
    first = _record("rdkafka#producer-1", REFUSED.format(ms=0))
    assert repeats.filter(first)
    assert first.getMessage() == f"FAIL [rdkafka#producer-1] {REFUSED.format(ms=0)}"
    shown = []
    for i in range(200):  # every client, every reconnect, timings that vary
        clock.now += 0.1
        record = _record(f"rdkafka#consumer-{i % 4}", REFUSED.format(ms=i % 3))
        if repeats.filter(record):
            shown.append(record)
    assert shown == []
    clock.now += 30.0
    later = _record("rdkafka#producer-1", REFUSED.format(ms=1))
    assert repeats.filter(later)
    assert later.getMessage().endswith("(200 more like this not shown)")
    clock.now += 30.0
    quiet = _record("rdkafka#producer-1", REFUSED.format(ms=1))
    assert repeats.filter(quiet)
    assert "not shown" not in quiet.getMessage()


def test_different_messages_and_levels_are_not_held_back() -> None:
    repeats = RepeatFilter(period=30.0, clock=ManualClock())
    assert repeats.filter(_record("rdkafka#producer-1", "one"))
    assert repeats.filter(_record("rdkafka#producer-1", "two"))
    assert repeats.filter(_record("rdkafka#producer-1", "one", logging.WARNING))
    assert not repeats.filter(_record("rdkafka#producer-2", "one"))
    plain = logging.LogRecord("x", logging.ERROR, __file__, 1, "plain %s", ("a",), None)
    assert repeats.filter(plain)
    assert not repeats.filter(
        logging.LogRecord("x", logging.ERROR, __file__, 2, "plain a", (), None)
    )


def test_the_librdkafka_logger_gets_one_filter() -> None:
    librdkafka_logger()
    logger = librdkafka_logger()
    assert sum(isinstance(f, RepeatFilter) for f in logger.filters) == 1


# --- the one line when Kafka is not there ----------------------------------------------------


def test_unreachable_names_the_address_and_the_settings() -> None:
    error = unreachable({"bootstrap.servers": "127.0.0.1:1"}, 15.0)
    assert str(error) == (
        "cannot reach Kafka at 127.0.0.1:1 within 15s; check kafka.bootstrap.servers "
        "(runner.startup.timeout)"
    )
    assert "within 2m" in str(unreachable({"bootstrap.servers": "b:9092"}, 120.0))


def test_unreachable_hides_an_address_that_came_from_a_secret() -> None:
    kafka = KafkaProperties(
        {"bootstrap.servers": "secret-host:9092"}, secret_keys={"bootstrap.servers"}
    )
    assert "secret-host" not in str(unreachable(kafka, 15.0))
    assert "at [redacted] within 15s" in str(unreachable(kafka, 15.0))


def test_a_refusal_that_is_not_about_reaching_kafka_says_what_kafka_said() -> None:
    refused = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied by ACL"))
    error = translated(refused, {"bootstrap.servers": "b:9092"}, 15.0, "describing group 'g'")
    assert str(error) == "Kafka at b:9092 failed describing group 'g': denied by ACL"
    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT))
    assert "cannot reach Kafka at b:9092 within 15s" in str(
        translated(timed_out, {"bootstrap.servers": "b:9092"}, 15.0, "listing topics")
    )
