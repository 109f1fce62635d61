"""The fault suite's verifier: what reached Kafka against what the vendor served.

The core, :func:`check`, is pure: it takes the events of the events topic (read_committed, in
offset order), the simulator's ground truth and each key's committed state, and says what is
wrong. :func:`verify` is the shell that reads those from Kafka and the simulator, after
checking that no transaction is left hanging, and counts the aborted records a
read_uncommitted read sees (proof that the faults hit open transactions).

What it checks, per record key ``poller/tenant``:

- sequences are ``1..n`` in offset order: a repeated number is a duplicate, a missing one a gap;
- every served ``(id, version)`` has exactly one event: two events are a duplicate; none is a
  loss, unless a later-served version of the same item has an event (the version was served to
  a poll whose transaction aborted, and the item changed before the retry: the runner can never
  see it again, and must not); an event for a version never served is a phantom;
- the final version of every live item has exactly one event (the runners caught up);
- the committed state's ``sequence`` is the last event's, and its snapshot holds each item's
  last published version.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # documented, not in __all__
    AdminClient,
    OffsetSpec,
)

from integration.faults.topics import QUIET, read_raw
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder
from watukuy.serde.state import decode_item, decode_state

MAX_PROBLEMS = 20
"""Problems listed per verdict; the counts say how many there were in all."""


@dataclass(frozen=True)
class SeenEvent:
    """One event as a read_committed consumer found it."""

    key: str  # the record key, poller/partition
    subject: str
    version: str
    sequence: int
    type: str = "updated"
    partition: int = 0
    offset: int = 0


@dataclass(frozen=True)
class TenantTruth:
    """What the vendor served one tenant, and what it holds at the end.

    ``served``: every ``(id, version)`` handed out intact in a page, in first-served order.
    ``final``: ``{id: version}`` of the live items at the end, ``None`` for a removed tenant.
    """

    served: Sequence[tuple[str, str]]
    final: Mapping[str, str] | None

    @property
    def removed(self) -> bool:
        return self.final is None


@dataclass(frozen=True)
class Cursor:
    """A key's committed state: its last sequence, its snapshot and whether it is paused."""

    sequence: int
    versions: Mapping[str, str] = field(default_factory=dict)
    paused: str | None = None


@dataclass
class Verdict:
    events_verified: int = 0
    duplicates: int = 0
    losses: int = 0
    superseded: int = 0
    aborted_seen: int = 0
    problems: list[str] = field(default_factory=list)
    hidden: int = 0  # problems beyond MAX_PROBLEMS

    @property
    def ok(self) -> bool:
        return not self.problems and not self.duplicates and not self.losses

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.hidden += 1

    def summary(self) -> list[str]:
        more = [f"... and {self.hidden} more problem(s)"] if self.hidden else []
        return [*self.problems, *more]


# -- the pure core --------------------------------------------------------------------------


def check(
    events: Iterable[SeenEvent],
    truth: Mapping[str, TenantTruth],
    cursors: Mapping[str, Cursor | None],
) -> Verdict:
    """Everything wrong with ``events`` given the vendor's ``truth`` and the committed
    ``cursors``, both keyed by record key (``poller/tenant``)."""
    verdict = Verdict()
    by_key: dict[str, list[SeenEvent]] = defaultdict(list)
    for event in sorted(events, key=lambda e: (e.partition, e.offset)):
        by_key[event.key].append(event)
    for key in sorted(by_key.keys() - truth.keys()):
        verdict.problem(f"{key}: {len(by_key[key])} event(s) for a key the vendor never served")
    for key in sorted(truth):
        _check_key(key, by_key.get(key, []), truth[key], cursors.get(key), verdict)
    return verdict


def _check_key(
    key: str, events: list[SeenEvent], truth: TenantTruth, cursor: Cursor | None, verdict: Verdict
) -> None:
    duplicate = _check_sequences(key, events, verdict)
    changes = [e for e in events if e.type != "deleted"]  # deletions were never served
    counts = Counter((e.subject, e.version) for e in changes)
    # An event that repeats a version or a sequence number is one duplicate, not two.
    repeats = {(e.subject, e.version) for e in changes if counts[(e.subject, e.version)] > 1}
    for pair in sorted(repeats):
        verdict.problem(f"{key}: {pair[0]} version {pair[1]} published {counts[pair]} times")
    verdict.duplicates += sum(counts[pair] - 1 for pair in repeats)
    verdict.duplicates += sum(
        1 for e in duplicate if counts[(e.subject, e.version)] == 1 or e.type == "deleted"
    )

    served = list(dict.fromkeys(truth.served))  # a version served twice is one version
    served_set = set(served)
    for subject, version in sorted(counts.keys() - served_set):
        verdict.problem(f"{key}: event for {subject} version {version}, never served")
    # Walking the served log backwards, ``later`` holds the items with an event for a version
    # served after the current one: an unpublished version of those was superseded.
    later: set[str] = set()
    for subject, version in reversed(served):
        if counts[(subject, version)]:
            verdict.events_verified += 1
            later.add(subject)
        elif subject in later:
            verdict.superseded += 1
        else:
            verdict.losses += 1
            verdict.problem(f"{key}: {subject} version {version} was served, never published")
            later.add(subject)  # one loss per item: its older versions are not lost again
    for subject, version in sorted((truth.final or {}).items()):
        if (subject, version) not in served_set:
            verdict.losses += 1
            verdict.problem(f"{key}: final version {version} of {subject} was never published")
    _check_cursor(key, events, cursor, verdict)


def check_dead_letters(
    letters: Sequence[bytes], poisoned: Mapping[str, Sequence[tuple[str, str]]], verdict: Verdict
) -> None:
    """Each poisoned ``(id, version)`` (by record key, in first-served order) has exactly one
    dead letter, or, like an event, is superseded by a later version of the item that has one.

    A dead letter holds the item's JSON, and every version the simulator serves carries its
    ``etag``: the letter of a version is the one whose bytes hold that etag.
    """
    for key, versions in sorted(poisoned.items()):
        later: set[str] = set()
        for subject, version in reversed(list(dict.fromkeys(versions))):
            found = sum(1 for letter in letters if version.encode() in letter)
            if found > 1:
                verdict.duplicates += found - 1
                verdict.problem(f"{key}: poisoned {subject} version {version}: {found} letters")
            if found == 0 and subject not in later:
                verdict.losses += 1
                verdict.problem(f"{key}: poisoned {subject} version {version}: no dead letter")
            later.add(subject)


def _check_sequences(key: str, events: list[SeenEvent], verdict: Verdict) -> list[SeenEvent]:
    """Problems for gaps and repeats of the per-key sequence; the events that repeat one."""
    seen: set[int] = set()
    repeated: list[SeenEvent] = []
    expected = 1
    for event in events:
        if event.sequence in seen:
            repeated.append(event)
            verdict.problem(f"{key}: sequence {event.sequence} repeated at offset {event.offset}")
            continue
        seen.add(event.sequence)
        if event.sequence != expected:
            verdict.problem(
                f"{key}: sequence {event.sequence} at offset {event.offset}, expected {expected}"
            )
        expected = max(expected, event.sequence + 1)
    return repeated


def _check_cursor(
    key: str, events: list[SeenEvent], cursor: Cursor | None, verdict: Verdict
) -> None:
    if cursor is None:
        if events:
            verdict.problem(f"{key}: events published but no committed state")
        return
    last_sequence = max((e.sequence for e in events), default=0)
    if cursor.sequence != last_sequence:
        verdict.problem(
            f"{key}: committed sequence {cursor.sequence}, last event's is {last_sequence}"
        )
    last_version: dict[str, str] = {}
    for event in events:
        if event.type == "deleted":
            last_version.pop(event.subject, None)  # the snapshot marks it deleted
        else:
            last_version[event.subject] = event.version
    wrong = sorted(s for s, v in last_version.items() if cursor.versions.get(s) != v)
    if wrong:
        verdict.problem(
            f"{key}: the snapshot disagrees with the last event of {len(wrong)} item(s), "
            f"e.g. {wrong[0]}: {cursor.versions.get(wrong[0])} != {last_version[wrong[0]]}"
        )


# -- the Kafka shell ------------------------------------------------------------------------


def settle_transactions(
    bootstrap: str, topics: Sequence[str], timeout: float
) -> dict[TopicPartition, tuple[int, int]]:
    """Wait until each partition's last stable offset reaches its high watermark; what is
    still hanging after ``timeout`` seconds, as ``{partition: (lso, hw)}``."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    metadata = admin.list_topics(timeout=15).topics
    partitions = [
        TopicPartition(topic, p)
        for topic in topics
        if topic in metadata
        for p in metadata[topic].partitions
    ]
    deadline = time.monotonic() + timeout
    while True:
        stable = _offsets(admin, partitions, IsolationLevel.READ_COMMITTED)
        high = _offsets(admin, partitions, IsolationLevel.READ_UNCOMMITTED)
        hanging = {tp: (stable[tp], high[tp]) for tp in partitions if stable[tp] < high[tp]}
        if not hanging or time.monotonic() > deadline:
            return hanging
        time.sleep(0.5)


def _offsets(
    admin: AdminClient, partitions: list[TopicPartition], isolation: IsolationLevel
) -> dict[TopicPartition, int]:
    key = {(tp.topic, tp.partition): tp for tp in partitions}
    futures = admin.list_offsets(
        {
            TopicPartition(tp.topic, tp.partition): OffsetSpec.latest()  # type: ignore[no-untyped-call]
            for tp in partitions
        },
        isolation_level=isolation,
        request_timeout=15,
    )
    return {key[(tp.topic, tp.partition)]: future.result().offset for tp, future in futures.items()}


def read_events(bootstrap: str, prefix: str, poller: str) -> tuple[list[SeenEvent], int]:
    """The committed events of ``poller``, and how many aborted records sit among them and
    the state and snapshot records."""
    topic = f"{prefix}.events.{poller}"
    resolver = SchemaTopicResolver({"bootstrap.servers": bootstrap, **QUIET}, f"{prefix}.schemas")
    decode = event_decoder(resolve=resolver)
    try:
        events = []
        for record in read_raw(bootstrap, [topic]):
            if record.value is None or record.key is None:
                continue
            event = decode(record.value)
            events.append(
                SeenEvent(
                    record.key.decode(),
                    event.subject,
                    event.version,
                    event.sequence,
                    event.type,
                    record.partition,
                    record.offset,
                )
            )
    finally:
        resolver.close()
    return events, count_aborted(bootstrap, [topic, f"{prefix}.state", f"{prefix}.items"])


def count_aborted(bootstrap: str, topics: Sequence[str]) -> int:
    """Records a read_uncommitted read sees and a read_committed one does not: the data of
    aborted transactions (control records are shown to neither)."""
    kept = {(r.topic, r.partition, r.offset) for r in read_raw(bootstrap, topics)}
    everything = read_raw(bootstrap, topics, committed=False)
    return sum(1 for r in everything if (r.topic, r.partition, r.offset) not in kept)


def read_dead_letters(bootstrap: str, prefix: str, poller: str) -> list[bytes]:
    """The committed values of the poller's DLQ topic."""
    records = read_raw(bootstrap, [f"{prefix}.dlq.{poller}"])
    return [r.value for r in records if r.value is not None]


def read_cursors(bootstrap: str, prefix: str) -> dict[str, Cursor | None]:
    """Each key's committed state and snapshot, as compaction would leave them."""
    state: dict[str, bytes | None] = {}
    for record in read_raw(bootstrap, [f"{prefix}.state"]):
        if record.key is not None and not record.key.startswith(b"cmd/"):
            state[record.key.decode()] = record.value
    versions: dict[str, dict[str, str]] = defaultdict(dict)
    items: dict[bytes, bytes | None] = {}
    for record in read_raw(bootstrap, [f"{prefix}.items"]):
        if record.key is not None:
            items[record.key] = record.value
    for value in items.values():
        if value is not None:
            owner, identity, entry = decode_item(value)
            if entry.deleted is None:
                versions[owner][identity] = entry.version
    cursors: dict[str, Cursor | None] = {}
    for owner, value in state.items():
        if value is None:
            cursors[owner] = None
            continue
        decoded = decode_state(value)
        cursors[owner] = Cursor(decoded.sequence, dict(versions[owner]), decoded.paused)
    return cursors


def verify(
    bootstrap: str,
    prefix: str,
    truth: Mapping[str, TenantTruth],
    *,
    poller: str = "invoices",
    transaction_timeout: float = 10.0,
    poisoned: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> Verdict:
    """Read what the runners left on Kafka and :func:`check` it; run it once the runners are
    stopped (or killed: their open transactions are aborted within ``transaction_timeout``).
    With ``poisoned`` (by record key, the versions served poisoned) the DLQ is checked too."""
    topics = [
        f"{prefix}.events.{poller}",
        f"{prefix}.dlq.{poller}",
        f"{prefix}.state",
        f"{prefix}.items",
        f"{prefix}.parked",
    ]
    # The broker aborts a dead producer's transaction once it times out, then within its
    # cleanup interval (1 s on the test broker); a margin covers a busy machine.
    hanging = settle_transactions(bootstrap, topics, transaction_timeout + 15)
    events, aborted = read_events(bootstrap, prefix, poller)
    verdict = check(events, truth, read_cursors(bootstrap, prefix))
    verdict.aborted_seen = aborted
    if poisoned is not None:
        check_dead_letters(read_dead_letters(bootstrap, prefix, poller), poisoned, verdict)
    for tp, (stable, high) in sorted(hanging.items(), key=lambda i: (i[0].topic, i[0].partition)):
        verdict.problem(
            f"{tp.topic}[{tp.partition}]: a transaction is hanging (last stable offset "
            f"{stable}, high watermark {high})"
        )
    return verdict
