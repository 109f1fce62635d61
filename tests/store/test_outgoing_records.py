"""A key's commit becomes exactly the Kafka records it always did (topic, key, value, partition,
headers), byte for byte, however its events and snapshot entries are assembled.

The reference below is the record assembly as it was before it was batched per key (one
record per event and per entry, each value written by fastavro), kept here as the spec.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watukuy.core.events import Event
from watukuy.core.schedule import KeySchedule
from watukuy.core.state import LaneState, PartitionState, SnapshotEntry
from watukuy.serde import framing
from watukuy.serde.events import EventSchemas, encode_event, event_record
from watukuy.store.base import KeyCommit
from watukuy.store.kafka import records
from watukuy.store.kafka.io import Record
from watukuy.store.kafka.outgoing import Outgoing
from watukuy.store.kafka.topics import TopicLayout

LAYOUT = TopicLayout("wk", 8, 1)
TOPICS = {"invoices": "wk.events.invoices", "tickets": "wk.events.tickets"}
SCHEMAS = EventSchemas({"invoices": None, "tickets": None})
SOURCE = "watukuy://test"

# Any text but lone surrogates (a Kafka key must be UTF-8); "/" and "%" are escaped in keys.
TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["a/b", "100%", "%2F", "/", "ünï/cödé"]
)
SEEN = st.floats(allow_nan=False) | st.integers(0, 2**40)


def fastavro(event: Event) -> bytes:
    writer = SCHEMAS.writer(event.poller)
    return framing.encode(writer.schema, event_record(event, writer.data, validated=True))


def reference(commit: KeyCommit, partition: int) -> list[Record]:
    state = commit.state
    poller, key_name = state.poller, state.partition
    out: list[Record] = []
    for event in commit.events:
        millis = event.time.isoformat(timespec="milliseconds")  # Avro's precision
        headers = [
            ("ce_specversion", b"1.0"),
            ("ce_id", event.id.encode()),
            ("ce_type", f"watukuy.{event.type}".encode()),
            ("ce_source", f"{SOURCE}/{event.poller}/{event.partition}".encode()),
            ("ce_subject", event.subject.encode()),
            ("ce_time", millis.replace("+00:00", "Z").encode()),
            ("content-type", b"application/avro"),
        ]
        topic = TOPICS[event.poller]
        out.append(Record(topic, event.key.encode(), fastavro(event), None, headers))
    for identity, entry in commit.upserts.items():
        key = records.item_key(poller, key_name, identity)
        value = records.encode_item(poller, key_name, identity, entry)
        out.append(Record(LAYOUT.items, key, value, partition))
    key = records.state_key(poller, key_name)
    out.append(Record(LAYOUT.state, key, records.encode_state(state), partition))
    return out


@st.composite
def commits(draw: Any) -> KeyCommit:
    poller = draw(st.sampled_from(sorted(TOPICS)))
    partition = draw(TEXT)
    pages = draw(st.lists(st.datetimes(timezones=st.just(UTC)), min_size=1, max_size=3))
    events: list[Event] = []
    upserts: dict[str, SnapshotEntry] = {}
    for time in pages:  # a commit may hold several pages, each with its own time
        # Detection gives a page's entries one seen, scan and deleted (the same objects).
        seen, scan, deleted = draw(SEEN), draw(st.integers(0, 2**63 - 1)), draw(st.none() | SEEN)
        for identity in draw(st.lists(TEXT, max_size=4)):
            kind = draw(st.sampled_from(["created", "updated", "deleted"]))
            version = draw(TEXT)
            events.append(
                Event(
                    draw(st.text(max_size=32)),
                    poller,
                    partition,
                    identity,
                    kind,  # type: ignore[arg-type]
                    version,
                    len(events) + 1,
                    time,
                    draw(st.sampled_from(["live", "backfill", "reconcile"])),
                    draw(st.integers(0, 2**31 - 1)),
                    None if kind == "deleted" else {"id": identity, "n": draw(SEEN)},
                )
            )
            # Each of them the page's or its own, so that any one may differ alone.
            upserts[identity] = SnapshotEntry(
                version,
                draw(st.just(seen) | SEEN),
                draw(st.just(scan) | st.integers(0, 2**63 - 1)),
                draw(st.just(deleted) | st.none() | SEEN),
            )
    return KeyCommit(state=state_of(poller, partition), events=events, upserts=upserts)


def state_of(poller: str, partition: str) -> PartitionState:
    return PartitionState(poller, partition, LaneState(cursor=None), KeySchedule(30.0, 0.0))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(commit=commits(), partition=st.integers(0, 7))
def test_a_commit_is_the_records_it_always_was(commit: KeyCommit, partition: int) -> None:
    outgoing = Outgoing(
        LAYOUT, TOPICS, {}, SOURCE, lambda event: encode_event(event, SCHEMAS, validated=True)
    )
    assert outgoing.of(commit, partition) == reference(commit, partition)


def test_keys_in_turn_never_share_their_parts() -> None:
    """What one key's records share is computed per key: the next key's are its own."""
    outgoing = Outgoing(
        LAYOUT, TOPICS, {}, SOURCE, lambda event: encode_event(event, SCHEMAS, validated=True)
    )
    time = datetime(2026, 3, 1, tzinfo=UTC)
    for n in range(3):
        for partition in ("t/1", "t%2", "t/1"):
            event = Event(
                f"id-{n}",
                "invoices",
                partition,
                "s",
                "created",
                "v",
                n + 1,
                time + timedelta(seconds=n),
                "live",
                1,
                {"n": n},
            )
            state = state_of("invoices", partition)
            entry = SnapshotEntry("v", n, 0)
            commit = KeyCommit(state=state, events=[event], upserts={"s": entry})
            assert outgoing.of(commit, 3) == reference(commit, 3)
