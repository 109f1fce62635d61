"""``<prefix>.configs`` and ``<prefix>.status`` on a real broker: what one instance writes, the
others see; what a new instance reads at start; what reaches the topics' bytes."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration.kafka_support import delete_prefix, latest_values, read_to_end, unique_prefix
from watukuy.control.activetopics import Published
from watukuy.control.configs import ConfigTopic, Conflict, encode_connector, encode_target
from watukuy.control.keystatus import BackfillProgress, KeyStatus
from watukuy.control.status import FULL_EVERY, StatusTopic
from watukuy.core.inspect import PollerInspect
from watukuy.store.kafka.clients import admin_client
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

Change = tuple[str, Any, Any]


@pytest.fixture
def layout(kafka_bootstrap: str) -> Iterator[TopicLayout]:
    layout = TopicLayout(unique_prefix(), partitions=3, replication_factor=1)
    ensure_topics(admin_client({"bootstrap.servers": kafka_bootstrap}), layout, [])
    yield layout
    delete_prefix(kafka_bootstrap, layout.prefix)


@pytest.fixture
def kafka(kafka_bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": kafka_bootstrap}


class Clock:
    """Seconds since the epoch, moved by the test."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def _until(condition: Any) -> None:
    """Until ``condition()`` holds: what another instance reads arrives in its own time."""
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _records(bootstrap: str, topic: str, *, committed: bool = True) -> list[Any]:
    return read_to_end(bootstrap, [topic], committed=committed)


# -- configs ----------------------------------------------------------------------------------

TICKETS = {"request": {"url": "https://api.example.com/tickets"}, "identity": "id"}
TICKETS_2 = {"request": {"url": "https://api.example.com/v2/tickets"}, "identity": "id"}


@pytest.fixture
async def configs(kafka: dict[str, Any], layout: TopicLayout) -> AsyncIterator[list[ConfigTopic]]:
    """The ConfigTopics a test starts (with ``_started``), stopped at its end."""
    made: list[ConfigTopic] = []
    yield made
    for topic in made:
        await topic.stop()


async def _started(
    made: list[ConfigTopic], kafka: dict[str, Any], layout: TopicLayout, runner: str
) -> tuple[ConfigTopic, list[Change]]:
    seen: list[Change] = []
    topic = ConfigTopic(
        kafka,
        layout,
        runner_id=runner,
        on_change=lambda name, config, target: seen.append((name, config, target)),
    )
    made.append(topic)
    await topic.start()
    return topic, seen


async def test_a_put_on_one_instance_reaches_the_others_listener_in_order(
    configs: list[ConfigTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    one, seen_by_one = await _started(configs, kafka, layout, "r1")
    two, seen_by_two = await _started(configs, kafka, layout, "r2")

    assert await one.put("tickets", TICKETS, "RUNNING") == 1
    assert await one.put("tickets", TICKETS, "PAUSED") == 2
    assert await one.put("orders", TICKETS_2, "STOPPED") == 1
    assert await one.put("tickets", TICKETS_2, "RUNNING") == 3
    assert await one.delete("tickets")

    expected = [
        ("tickets", TICKETS, "RUNNING"),
        ("tickets", TICKETS, "PAUSED"),
        ("orders", TICKETS_2, "STOPPED"),
        ("tickets", TICKETS_2, "RUNNING"),
        ("tickets", None, None),
    ]
    assert seen_by_one == expected  # a put returns once its writer has read it back
    await _until(lambda: len(seen_by_two) >= len(expected))
    assert seen_by_two == expected
    assert two.view() == {"orders": (TICKETS_2, "STOPPED")}
    assert two.version("orders") == 1 and two.version("tickets") == 0


async def test_a_new_instance_starts_from_the_full_view(
    configs: list[ConfigTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    one, _ = await _started(configs, kafka, layout, "r1")
    await one.put("tickets", TICKETS, "RUNNING")
    await one.set_target("tickets", "PAUSED")
    await one.put("orders", TICKETS_2, "RUNNING")
    await one.put("gone", TICKETS, "RUNNING")
    await one.delete("gone")

    later, seen = await _started(configs, kafka, layout, "r2")
    assert later.view() == {"orders": (TICKETS_2, "RUNNING"), "tickets": (TICKETS, "PAUSED")}
    found = later.get("tickets")
    assert found is not None and found.version == 2
    assert seen == []  # history is the starting view, not changes

    await one.put("orders", TICKETS_2, "STOPPED")
    await _until(lambda: seen == [("orders", TICKETS_2, "STOPPED")])


async def test_a_delete_writes_a_tombstone_for_both_records(
    configs: list[ConfigTopic], kafka: dict[str, Any], kafka_bootstrap: str, layout: TopicLayout
) -> None:
    one, _ = await _started(configs, kafka, layout, "r1")
    await one.put("tickets", TICKETS, "RUNNING")
    assert await one.delete("tickets") is True
    assert await one.delete("tickets") is False  # nothing left: nothing written

    latest = await asyncio.to_thread(latest_values, kafka_bootstrap, layout.configs)
    assert latest == {b"connector/tickets": None, b"target/tickets": None}
    assert len(await asyncio.to_thread(_records, kafka_bootstrap, layout.configs)) == 4
    later, _ = await _started(configs, kafka, layout, "r2")
    assert later.view() == {} and later.get("tickets") is None


async def test_the_two_records_of_a_put_are_one_transaction(
    configs: list[ConfigTopic], kafka: dict[str, Any], kafka_bootstrap: str, layout: TopicLayout
) -> None:
    one, _ = await _started(configs, kafka, layout, "r1")
    await one.put("tickets", TICKETS, "RUNNING")
    await one.put("tickets", TICKETS, "PAUSED")
    await one.delete("tickets")

    # Read uncommitted: each pair sits at consecutive offsets of one partition, followed by one
    # commit marker, which is how one transaction looks (two would put a marker between).
    written = await asyncio.to_thread(_records, kafka_bootstrap, layout.configs, committed=False)
    keys = [(r.key, r.offset) for r in written]
    assert [k for k, _ in keys] == [b"connector/tickets", b"target/tickets"] * 3
    offsets = [o for _, o in keys]
    for pair in range(3):
        connector, target = offsets[2 * pair], offsets[2 * pair + 1]
        assert target == connector + 1
        if pair < 2:
            assert offsets[2 * pair + 2] == target + 2  # the commit marker in between


async def test_a_reader_sees_both_records_of_a_transaction_or_neither(
    configs: list[ConfigTopic], kafka: dict[str, Any], kafka_bootstrap: str, layout: TopicLayout
) -> None:
    reader, seen = await _started(configs, kafka, layout, "reader")
    # A writer stopping between the two records of a put: the same records, by hand.
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{layout.prefix}.by-hand"}
    )
    await asyncio.to_thread(producer.init_transactions, 30)

    def write(name: str, *, commit: bool, hold: float = 0.0) -> None:
        producer.begin_transaction()
        value = encode_connector(name, TICKETS, 1)
        producer.produce(layout.configs, key=f"connector/{name}".encode(), value=value, partition=0)
        producer.flush(10)
        time.sleep(hold)  # the first record is in the log, uncommitted
        value = encode_target(name, "RUNNING", 1)
        producer.produce(layout.configs, key=f"target/{name}".encode(), value=value, partition=0)
        producer.flush(10)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    await asyncio.to_thread(write, "aborted", commit=False)
    held = asyncio.create_task(asyncio.to_thread(write, "held", commit=True, hold=1.5))
    await asyncio.sleep(1.0)
    assert reader.get("held") is None and seen == []  # its first record is written, not committed
    await held
    await _until(lambda: seen != [])
    await reader.put("after", TICKETS_2, "RUNNING")  # read back: all before it was read too

    assert seen == [("held", TICKETS, "RUNNING"), ("after", TICKETS_2, "RUNNING")]
    assert sorted(reader.view()) == ["after", "held"]
    later, _ = await _started(configs, kafka, layout, "later")
    assert sorted(later.view()) == ["after", "held"]
    written = await asyncio.to_thread(_records, kafka_bootstrap, layout.configs, committed=False)
    # The aborted pair is in the log; read_committed readers skip it.
    assert [r.key for r in written][:2] == [b"connector/aborted", b"target/aborted"]


async def test_a_stale_version_is_a_conflict_and_writes_nothing(
    configs: list[ConfigTopic], kafka: dict[str, Any], kafka_bootstrap: str, layout: TopicLayout
) -> None:
    one, _ = await _started(configs, kafka, layout, "r1")
    two, _ = await _started(configs, kafka, layout, "r2")
    assert await one.put("tickets", TICKETS, "RUNNING", expected_version=0) == 1
    await _until(lambda: two.version("tickets") == 1)
    assert await two.put("tickets", TICKETS_2, "RUNNING", expected_version=1) == 2
    await _until(lambda: one.version("tickets") == 2)

    with pytest.raises(Conflict, match="changed meanwhile"):
        await one.put("tickets", TICKETS, "PAUSED", expected_version=1)
    with pytest.raises(Conflict, match="already exists"):
        await one.put("tickets", TICKETS, "PAUSED", expected_version=0)
    assert len(await asyncio.to_thread(_records, kafka_bootstrap, layout.configs)) == 4
    assert one.view() == {"tickets": (TICKETS_2, "RUNNING")}


async def test_no_resolved_secret_is_ever_written(
    configs: list[ConfigTopic],
    kafka: dict[str, Any],
    kafka_bootstrap: str,
    layout: TopicLayout,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "s3cr3t-T0KEN-value-9d1f"
    monkeypatch.setenv("WATUKUY_TEST_CONFIG_TOKEN", secret)
    config = {
        "request": {
            "url": "https://api.example.com/{partition.data.slug}/tickets",
            "auth": {"bearer": "${env:WATUKUY_TEST_CONFIG_TOKEN}"},
        },
        "partitions": {
            "static": [{"key": "acme", "data": {"token": "${env:WATUKUY_TEST_CONFIG_TOKEN}"}}]
        },
        "identity": "id",
    }
    one, _ = await _started(configs, kafka, layout, "r1")
    await one.put("tickets", config, "RUNNING")
    assert one.view()["tickets"][0] == config  # read back as written: placeholders

    raw = await asyncio.to_thread(_records, kafka_bootstrap, layout.configs, committed=False)
    everything = b"".join((r.key or b"") + (r.value or b"") for r in raw)
    assert everything.count(b"${env:WATUKUY_TEST_CONFIG_TOKEN}") == 2
    assert secret.encode() not in everything
    stored = json.loads(next(r.value for r in raw if r.key == b"connector/tickets"))
    assert stored["config"] == config


# -- status -----------------------------------------------------------------------------------


def _status(partition: str, state: str = "RUNNING", **changes: Any) -> KeyStatus:
    values: dict[str, Any] = {
        "poller": "invoices",
        "partition": partition,
        "state": state,
        "owner": None,
        "lag": 3.0,
        "circuit": "closed",
        "parked": {"invalid": 0, "poison": 0},
    }
    values.update(changes)
    return KeyStatus(**values)


@pytest.fixture
async def statuses() -> AsyncIterator[list[StatusTopic]]:
    made: list[StatusTopic] = []
    yield made
    for topic in made:
        await topic.stop(clean=False)


async def _status_topic(
    made: list[StatusTopic],
    kafka: dict[str, Any],
    layout: TopicLayout,
    runner: str,
    clock: Clock,
    session_timeout: float = 10.0,
) -> StatusTopic:
    topic = StatusTopic(
        kafka,
        layout,
        runner_id=runner,
        session_timeout=session_timeout,
        clock=clock,
        heartbeats=False,
    )
    made.append(topic)
    await topic.start()
    return topic


def _key_records(bootstrap: str, topic: str) -> list[bytes]:
    return [r.key for r in read_to_end(bootstrap, [topic]) if r.key and r.key.startswith(b"key/")]


async def test_what_one_instance_publishes_another_shows(
    statuses: list[StatusTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    clock = Clock()
    writer = await _status_topic(statuses, kafka, layout, "r1", clock)
    viewer = await _status_topic(statuses, kafka, layout, "r2", clock)
    progress = BackfillProgress(pages=3, items=250, cursor="2026-01-05T00:00:00Z", fraction=0.25)
    written = await writer.publish(
        [
            _status("t1"),
            _status("t2", "FAILED", circuit="open", last_error="HTTP 500 from GET {url}"),
            _status("t3", backfill=progress),
        ]
    )
    assert written == 3

    await viewer.caught_up()
    shown = viewer.view("invoices")
    assert [(s.partition, s.state, s.owner) for s in shown] == [
        ("t1", "RUNNING", "r1"),
        ("t2", "FAILED", "r1"),
        ("t3", "RUNNING", "r1"),
    ]
    assert shown[1].last_error == "HTTP 500 from GET {url}"
    assert shown[2].backfill == progress
    assert all(s.updated_at == clock.now for s in shown)
    assert viewer.view("other") == [] and viewer.pollers() == ["invoices"]


async def test_only_changes_are_written_and_every_key_again_every_full_every(
    statuses: list[StatusTopic], kafka: dict[str, Any], kafka_bootstrap: str, layout: TopicLayout
) -> None:
    clock = Clock()
    writer = await _status_topic(statuses, kafka, layout, "r1", clock)
    keys = [_status("t1"), _status("t2")]
    assert await writer.publish(keys) == 2

    clock.now += 5
    assert await writer.publish([_status("t1", lag=8.0), _status("t2", lag=8.0)]) == 0  # lag grew
    clock.now += 5
    assert await writer.publish([_status("t1", "PAUSED"), _status("t2")]) == 1
    records = await asyncio.to_thread(_key_records, kafka_bootstrap, layout.status)
    assert records.count(b"key/invoices/t1") == 2 and records.count(b"key/invoices/t2") == 1

    clock.now += FULL_EVERY - 10  # FULL_EVERY after t2's last write, 10 s short of it for t1
    assert await writer.publish([_status("t1", "PAUSED"), _status("t2")]) == 1
    clock.now += 10
    assert await writer.publish([_status("t1", "PAUSED"), _status("t2")]) == 1
    records = await asyncio.to_thread(_key_records, kafka_bootstrap, layout.status)
    assert records.count(b"key/invoices/t1") == 3 and records.count(b"key/invoices/t2") == 2


async def test_a_key_an_instance_let_go_of_leaves_the_view_unless_it_moved(
    statuses: list[StatusTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    clock = Clock()
    first = await _status_topic(statuses, kafka, layout, "r1", clock)
    second = await _status_topic(statuses, kafka, layout, "r2", clock)
    await first.publish([_status(key) for key in ("t1", "t2", "t3", "t4")])
    await second.publish([_status("t4")])  # t4 moved to r2, which wrote first
    await first.caught_up()

    # r1 holds only t1 now: t2 was removed (still r1's partition), t3 moved to a runner that
    # has not written yet, t4 moved to r2, which has.
    let_go = ["invoices/t2", "invoices/t3", "invoices/t4"]
    await first.publish(
        [_status("t1")], owns=lambda poller, key: key in ("t1", "t2"), released=let_go
    )
    await second.caught_up()
    shown = [(s.partition, s.owner) for s in second.view("invoices")]
    assert shown == [("t1", "r1"), ("t3", "r1"), ("t4", "r2")]


async def test_a_key_shows_unassigned_once_its_owners_heartbeat_ages_out(
    statuses: list[StatusTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    clock = Clock()
    writer = await _status_topic(statuses, kafka, layout, "r1", clock, session_timeout=10)
    viewer = await _status_topic(statuses, kafka, layout, "r2", clock, session_timeout=10)
    await writer.publish([_status("t1")])
    await viewer.caught_up()

    clock.now += 10
    assert [s.state for s in viewer.view("invoices")] == ["RUNNING"]
    clock.now += 0.5
    assert [s.state for s in viewer.view("invoices")] == ["UNASSIGNED"]
    assert viewer.view("invoices")[0].owner == "r1"  # who had it last

    await writer.heartbeat()  # alive again
    await viewer.caught_up()
    assert [s.state for s in viewer.view("invoices")] == ["RUNNING"]


async def test_a_heartbeat_ages_out_on_the_real_clock_too(
    statuses: list[StatusTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    writer = StatusTopic(kafka, layout, runner_id="r1", session_timeout=1.5, heartbeats=False)
    statuses.append(writer)
    await writer.start()
    await writer.publish([_status("t1")])
    await writer.caught_up()
    assert [s.state for s in writer.view()] == ["RUNNING"]
    await asyncio.sleep(2.0)
    assert [s.state for s in writer.view()] == ["UNASSIGNED"]


async def test_a_running_instance_keeps_its_keys_assigned_by_beating_on_its_own(
    statuses: list[StatusTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    writer = StatusTopic(kafka, layout, runner_id="r1", session_timeout=1.5)  # beats every 0.5s
    statuses.append(writer)
    await writer.start()
    await writer.publish([_status("t1")])
    await asyncio.sleep(2.5)
    await writer.caught_up()
    assert [s.state for s in writer.view()] == ["RUNNING"]


async def test_a_clean_stop_shows_its_keys_unassigned_at_once(
    statuses: list[StatusTopic], kafka: dict[str, Any], kafka_bootstrap: str, layout: TopicLayout
) -> None:
    clock = Clock()
    leaving = await _status_topic(statuses, kafka, layout, "r1", clock)
    staying = await _status_topic(statuses, kafka, layout, "r2", clock)
    crashed = StatusTopic(
        kafka, layout, runner_id="r3", session_timeout=10, clock=clock, heartbeats=False
    )
    await crashed.start()
    await leaving.publish([_status("t1")])
    await staying.publish([_status("t2")])
    await crashed.publish([_status("t3")])

    statuses.remove(leaving)
    await leaving.stop()  # clean
    await crashed.stop(clean=False)  # as if killed
    await staying.caught_up()
    assert [(s.partition, s.state) for s in staying.view("invoices")] == [
        ("t1", "UNASSIGNED"),
        ("t2", "RUNNING"),
        ("t3", "RUNNING"),  # until its session times out
    ]
    latest = await asyncio.to_thread(latest_values, kafka_bootstrap, layout.status)
    assert latest[b"worker/r1"] is None
    assert json.loads(latest[b"worker/r3"] or b"{}")["runner"] == "r3"


async def test_heartbeats_say_which_partitions_each_live_runner_owns(
    statuses: list[StatusTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    """What standby replicas are chosen from: each runner's partitions as its heartbeat says,
    said again at the first publish after a rebalance, and gone with the runner."""
    clock = Clock()
    owned = {"r1": [2, 0], "r2": [1]}
    topics = {}
    for runner in owned:
        topics[runner] = StatusTopic(
            kafka,
            layout,
            runner_id=runner,
            session_timeout=10,
            clock=clock,
            heartbeats=False,
            owned=lambda runner=runner: owned[runner],
        )
        statuses.append(topics[runner])
        await topics[runner].start()
    r1, r2 = topics["r1"], topics["r2"]
    await r2.caught_up()
    assert r2.owners() == {"r1": {0, 2}, "r2": {1}}

    owned["r1"], owned["r2"] = [0], [1, 2]  # a rebalance moved partition 2
    await r2.publish([])  # a heartbeat not due yet, but the partitions changed
    await r1.caught_up()
    assert r1.owners() == {"r1": {0, 2}, "r2": {1, 2}}  # r1 has not said it yet
    await r1.publish([])
    await r2.caught_up()
    assert r2.owners() == {"r1": {0}, "r2": {1, 2}}

    clock.now += 11  # r1's heartbeat older than the session timeout: a dead runner owns nothing
    await r2.heartbeat()
    await r2.caught_up()
    assert r2.owners() == {"r2": {1, 2}}


def _inspect(partition: str, sequence: int, poison: int = 0) -> PollerInspect:
    return PollerInspect(
        poller="invoices",
        partition=partition,
        paused=False,
        circuit="closed",
        interval=1.0,
        next_due=None,
        lag=None,
        parked={"invalid": 0, "poison": poison},
        sequence=sequence,
    )


def _topic_of(found: Published) -> str:
    return f"events.{found.poller}" if found.kind == "events" else f"dlq.{found.poller}"


async def test_the_topics_a_connector_published_to_are_listed_everywhere_until_reset(
    statuses: list[StatusTopic], kafka: dict[str, Any], layout: TopicLayout
) -> None:
    clock = Clock()
    writer = await _status_topic(statuses, kafka, layout, "r1", clock)
    viewer = await _status_topic(statuses, kafka, layout, "r2", clock)

    await writer.list_topics([_inspect("t1", 0), _inspect("t2", 0)], _topic_of)
    await viewer.caught_up()
    assert viewer.active_topics("invoices") == []  # nothing published yet

    await writer.list_topics([_inspect("t1", 5), _inspect("t2", 0, poison=1)], _topic_of)
    await viewer.caught_up()
    assert viewer.active_topics("invoices") == ["dlq.invoices", "events.invoices"]
    assert viewer.active_topics("other") == []

    await viewer.reset_topics("invoices")  # any instance may reset
    await writer.caught_up()
    assert writer.active_topics("invoices") == []
    await writer.list_topics([_inspect("t1", 5), _inspect("t2", 0, poison=1)], _topic_of)
    await viewer.caught_up()
    assert viewer.active_topics("invoices") == []  # nothing published since the reset

    await writer.list_topics([_inspect("t1", 6), _inspect("t2", 0, poison=1)], _topic_of)
    late = await _status_topic(statuses, kafka, layout, "r3", clock)  # reads it from the topic
    assert late.active_topics("invoices") == ["events.invoices"]

    # A runner that takes a key over lists what it published before, at its first look.
    await late.reset_topics("invoices")
    await late.list_topics([_inspect("t1", 6)], _topic_of)
    await viewer.caught_up()
    assert viewer.active_topics("invoices") == ["events.invoices"]
