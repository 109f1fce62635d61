"""The restore's catch-up on the Kafka thread (watukuy.store.kafka.catchup), over stand-in
consumers and a clock that only moves when told: it finds its windows even when a client's
metadata went stale, never holds a partition past its patience, and leaves the roll-forward
what decoding every event of the window would (it decodes only those beyond the state)."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.clock import ManualClock
from watukuy.core.events import Event
from watukuy.core.poll import fresh_state
from watukuy.core.poller import define_poller
from watukuy.serde.events import EventSchemas, encode_event, published_event
from watukuy.store.kafka import catchup as catchup_module
from watukuy.store.kafka import records
from watukuy.store.kafka.catchup import PATIENCE, PROBE, EventsCatchUp
from watukuy.store.kafka.catchup_rule import missed
from watukuy.store.kafka.restore import RestoredKeys

pytestmark = pytest.mark.unit

TOPIC = "p.events.invoices"
INVOICES = define_poller(
    name="invoices", fetch=lambda ctx: [], identity=lambda i: i["id"], version=lambda i: i["v"]
)


class Offsets:
    """Answers "unknown partition" until its metadata is refreshed (``healthy``: at once);
    then the window starts at 5 and ends at 10."""

    def __init__(self, *, healthy: bool = False, stale_for_ever: bool = False) -> None:
        self.fresh = healthy
        self.stale_for_ever = stale_for_ever
        self.refreshed: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.refreshed.append(topic)
        self.fresh = not self.stale_for_ever

    def offsets_for_times(self, tps: list[TopicPartition], timeout: float) -> list[Any]:
        if not self.fresh:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return [TopicPartition(tp.topic, tp.partition, 5) for tp in tps]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> Any:
        return 0, 10


class Reader:
    def __init__(self) -> None:
        self.assigned: dict[tuple[str, int], int] = {}
        self.at = -1001  # no position yet

    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        self.assigned.update({(tp.topic, tp.partition): tp.offset for tp in tps})

    def incremental_unassign(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.assigned.pop((tp.topic, tp.partition), None)

    def consume(self, count: int, timeout: float) -> list[Any]:
        return []

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.at) for tp in tps]


def restored() -> RestoredKeys:
    keys = RestoredKeys()
    keys.stamps[b"invoices/t_1"] = 1_000_000
    return keys


def catch_up(offsets: Offsets) -> tuple[EventsCatchUp, Reader, ManualClock, list[int]]:
    clock, reader, finished = ManualClock(), Reader(), []
    catchup = EventsCatchUp(
        reader,  # type: ignore[arg-type]
        offsets,  # type: ignore[arg-type]
        lambda poller: (TOPIC, 1) if poller == "invoices" else None,
        clock,
    )
    catchup.begin(3, restored(), lambda: finished.append(3))
    return catchup, reader, clock, finished


def test_a_window_is_read_from_its_start_to_its_end_then_the_partition_goes_on() -> None:
    catchup, reader, clock, finished = catch_up(Offsets(healthy=True))
    assert reader.assigned == {(TOPIC, 0): 5}
    catchup.read()
    assert finished == []  # not at the end yet
    reader.at = 10
    clock.now += 0.5  # no end-of-partition event here: positions are looked at every 0.5 s
    catchup.read()
    assert finished == [3] and reader.assigned == {}


def test_stale_metadata_after_a_broker_restart_is_refreshed_and_the_window_found() -> None:
    offsets = Offsets()
    catchup, reader, clock, finished = catch_up(offsets)
    assert offsets.refreshed == [TOPIC] and reader.assigned == {}
    catchup.read()  # asked again only a second later
    assert reader.assigned == {}
    clock.now += 1.5
    catchup.read()
    assert reader.assigned == {(TOPIC, 0): 5} and finished == []


def test_a_window_that_cannot_be_found_is_given_up_after_the_patience(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catchup, reader, clock, finished = catch_up(Offsets(stale_for_ever=True))
    while clock.now < 100.0 + PATIENCE:
        clock.now += 1.5
        catchup.read()
        assert finished == [] or clock.now > 100.0 + PATIENCE
    clock.now += 1.5
    catchup.read()
    assert finished == [3] and reader.assigned == {}
    assert "partition 3: gave up reading what its keys published" in caplog.text


def test_a_window_that_is_never_read_to_its_end_is_given_up_after_the_patience(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    catchup, reader, clock, finished = catch_up(Offsets(healthy=True))
    reader.at = 7
    clock.now += PATIENCE / 2
    catchup.read()
    assert finished == []
    clock.now += PATIENCE
    catchup.read()
    assert finished == [3] and reader.assigned == {}
    assert "its events were not read to their end" in caplog.text


# -- what a window's events leave for the roll-forward ---------------------------------------


class Message:
    """A fetched event record (what the reader's ``consume`` gives)."""

    def __init__(self, key: bytes, value: bytes, offset: int, stamp: int) -> None:
        self._key, self._value, self._offset, self._stamp = key, value, offset, stamp

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, self._stamp)

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def error(self) -> None:
        return None


class Fetched(Reader):
    """Gives the window's records from where it was assigned, in order."""

    def __init__(self, messages: list[Message]) -> None:
        super().__init__()
        self.messages = messages
        self.starts: list[int] = []  # where it was assigned, each time
        self.next: int | None = None

    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        super().incremental_assign(tps)
        self.starts.append(tps[0].offset)
        self.next, self.at = tps[0].offset, -1001

    def incremental_unassign(self, tps: list[TopicPartition]) -> None:
        super().incremental_unassign(tps)
        self.next = None

    def consume(self, count: int, timeout: float) -> list[Any]:
        at = self.next
        if at is None:
            return []
        taken = [m for m in self.messages if at <= m.offset() < at + count]
        if taken:
            self.next = self.at = taken[-1].offset() + 1
        return taken


def _events(sequences: list[int], partition: str = "t_1") -> list[bytes]:
    schemas = EventSchemas({"invoices": None})
    out = []
    for n, sequence in enumerate(sequences):
        subject = f"inv-{n % 7}"
        event = Event(
            f"e-{n}", "invoices", partition, subject, "updated", f"v{n}", sequence,
            datetime.fromtimestamp(1_000 + n, UTC), "live", 1, None,
        )  # fmt: skip
        out.append(encode_event(event, schemas))
    return out


BIG, IDLE = "t_1", "t_2"  # two keys whose events share one partition
BIG_STATE, IDLE_STATE = 2_500, 10


@pytest.mark.parametrize("probe", [100, PROBE])
@pytest.mark.parametrize(
    ("sequences", "idle"),
    [
        (list(range(1, 2_601)), None),  # the state accounts for its newest event: nothing missed
        (list(range(1, 2_504)), None),  # three beyond the state, after many it accounts for
        ([*range(2_000, 2_501), *range(1, 2_200)], None),  # removed and added again: anew
        ([*range(1, 1_500), 2_501, 2_502, *range(10, 20), 2_501, 2_502, 2_503], None),
        # beyond it across the first thousand, then an event it accounts for, then beyond again
        ([*range(1, 996), *range(2_501, 2_511), *range(5, 21), 2_501, 2_502], None),
        ([2_501, 2_502], None),  # only events beyond it
        ([*range(1, 2_401), *range(2_501, 2_801)], None),  # beyond it: more than the last events
        # another key of the partition, its events early: the window is read from its start
        (list(range(1, 2_501)), list(range(1, 13))),
        (list(range(1, 2_501)), [5, 6, 7, 8, 9, 10]),
        (list(range(1, 2_501)), []),  # and one without events: the same
    ],
)
def test_a_windows_events_leave_what_decoding_every_one_of_them_leaves(
    sequences: list[int], idle: list[int] | None, probe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether its last events were enough or the whole window was read after all."""
    monkeypatch.setattr(catchup_module, "PROBE", probe)
    raw = {BIG: _events(sequences, BIG), IDLE: _events(idle or [], IDLE)}
    garbage = b"\xc3\x01not an event"  # of the key, not readable: left out, as before
    half = len(raw[BIG]) // 2
    values = [
        *((IDLE, value) for value in raw[IDLE]),  # early in the window
        *((BIG, value) for value in raw[BIG][:half]),
        (BIG, garbage),
        *((BIG, value) for value in raw[BIG][half:]),
    ]
    keys = RestoredKeys()
    restored = [(BIG, BIG_STATE)] if idle is None else [(BIG, BIG_STATE), (IDLE, IDLE_STATE)]
    for partition, sequence in restored:
        state = replace(fresh_state(INVOICES, partition, 1_000.0), sequence=sequence)
        keys.apply_state(f"invoices/{partition}".encode(), records.encode_state(state), 1_000_000)
    messages = [
        Message(f"invoices/{partition}".encode(), value, 5 + n, 1_000_000)
        for n, (partition, value) in enumerate(values)
    ]
    reader, offsets = Fetched(messages), Offsets(healthy=True)
    offsets.get_watermark_offsets = lambda *_, **__: (0, 5 + len(messages))  # type: ignore[method-assign]
    finished: list[int] = []
    catchup = EventsCatchUp(
        reader,  # type: ignore[arg-type]
        offsets,  # type: ignore[arg-type]
        lambda poller: (TOPIC, 1) if poller == "invoices" else None,
        ManualClock(),
    )
    catchup.begin(3, keys, lambda: finished.append(3))
    while not finished:
        catchup.read()

    for partition, sequence in restored:
        every = [published_event(value, "invoices", partition) for value in raw[partition]]
        expected = missed(sequence, every)
        name = f"invoices/{partition}"
        assert keys.state(name).sequence == (expected[-1].sequence if expected else sequence)
        assert keys.missed(name) == expected
    probed = len(messages) > 2 * probe
    enough = probed and idle is None and any(n <= BIG_STATE for n in sequences[-probe:])
    whole = [] if enough else [5]
    assert reader.starts == ([5 + len(messages) - probe] if probed else []) + whole
