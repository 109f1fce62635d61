"""Where many partitions start or end now, asked in one request instead of one per partition.

A restore fixes the ends of three topics per assigned partition, and a control topic's reader
the ends of all its partitions, before reading. Asked one partition at a time
(``get_watermark_offsets``), each answer is a round trip, and on a consumer that is fetching it
queues behind a fetch the broker holds for ``fetch.wait.max.ms``: 32 partitions took 1.4 s at a
runner's start. ``offsets_for_times`` sends one ListOffsets request per broker for all of them,
with the special timestamps the protocol defines: ``OFFSET_END`` (-1) answers the end, which
for a read_committed consumer is the last stable offset (its isolation level goes with the
request), and ``OFFSET_BEGINNING`` (-2) the log start offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from watukuy.core.clock import Clock
from watukuy.core.errors import Retriable
from watukuy.store.kafka import clients

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "Answer",
    "Bounds",
    "bounds_now",
    "end_offset",
    "offsets_now",
    "watermarks",
]

Where = tuple[str, int]
"""(topic, partition)"""


@dataclass(slots=True)
class Answer:
    """The offsets found, and the error of each partition that had none."""

    offsets: dict[Where, int] = field(default_factory=dict)
    errors: dict[Where, KafkaError] = field(default_factory=dict)


def offsets_now(
    consumer: Consumer, partitions: Sequence[Where], which: int, timeout: float
) -> Answer:
    """Where each of ``partitions`` starts (``which`` :data:`OFFSET_BEGINNING`) or ends
    (:data:`OFFSET_END`) now, as ``consumer``'s isolation level sees it. A failure of the whole
    request raises ``KafkaException``, as librdkafka does."""
    answer = Answer()
    if not partitions:
        return answer
    asked = [TopicPartition(topic, partition, which) for topic, partition in partitions]
    for tp in consumer.offsets_for_times(asked, timeout=timeout):
        where = (tp.topic, tp.partition)
        if tp.error is not None:
            answer.errors[where] = tp.error
        else:
            answer.offsets[where] = int(tp.offset)
    return answer


_NOT_READY = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._UNKNOWN_PARTITION,
    }
)
# A client's own answer from its cached metadata, which may be stale after a broker restart.
_STALE_METADATA = frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART})


def end_offset(tail: Consumer, tp: TopicPartition, clock: Clock, deadline: float = 60.0) -> int:
    """The last stable offset (a read_committed consumer's high watermark), fixed now."""
    return watermarks(tail, tp, clock, deadline)[1]


def watermarks(
    tail: Consumer, tp: TopicPartition, clock: Clock, deadline: float = 60.0, timeout: float = 10
) -> tuple[int, int]:
    """Where the partition starts and (a read_committed consumer's high watermark: the last
    stable offset) ends, now.

    Partitions of a topic created a moment ago may not have a leader yet: wait for one.
    A consumer that is never assigned keeps the metadata it had for a topic: if a broker
    answered during its restart that a partition is unknown, librdkafka would keep saying so
    until its periodic refresh (minutes; a restore stalled that long after a node of a
    three-node cluster was SIGKILLed). Asking for the topic's metadata refreshes it.
    """
    give_up = clock.monotonic() + deadline
    while True:
        try:
            low, high = tail.get_watermark_offsets(tp, timeout=timeout, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            code = error.code()
            if code not in _NOT_READY or clock.monotonic() > give_up:
                raise Retriable(
                    f"cannot read the end of {tp.topic}[{tp.partition}]: {error.str()}"
                ) from exc
            if code in _STALE_METADATA:
                clients.refresh_metadata(tail, tp.topic)
            clock.sleep(0.2)


Bounds = dict[tuple[str, int], tuple[int, int, int]]
"""(topic, partition) -> where it starts, its last stable offset, its high watermark."""

FIRST_RETRY = 0.02  # seconds before asking again for partitions without a leader yet ...
LAST_RETRY = 0.2  # ... doubling up to this: a topic created a moment ago gets them in ms


def bounds_now(
    stable: Consumer,
    written: Consumer,
    partitions: Sequence[tuple[str, int]],
    clock: Clock,
    deadline: float = 60.0,
    timeout: float = 10,
) -> Bounds:
    """Where each of ``partitions`` starts and ends now, read_committed (the last stable
    offset) and read_uncommitted (the high watermark), asked in three requests for all of them
    (:mod:`.offsets`), waiting as :func:`watermarks` does for partitions without a leader."""
    found: dict[int, dict[tuple[str, int], int]] = {}
    asks = ((stable, OFFSET_BEGINNING), (stable, OFFSET_END), (written, OFFSET_END))
    give_up = clock.monotonic() + deadline
    pause = FIRST_RETRY
    for n, (consumer, which) in enumerate(asks):
        wanted = list(partitions)
        got = found.setdefault(n, {})
        while wanted:
            try:
                answer = offsets_now(consumer, wanted, which, timeout)
                got.update(answer.offsets)
                errors = answer.errors
            except KafkaException as exc:  # the whole request
                errors = {where: exc.args[0] for where in wanted}
            if not errors:
                break
            (topic, partition), error = next(iter(errors.items()))
            code = error.code()
            if code not in _NOT_READY or clock.monotonic() > give_up:
                raise Retriable(f"cannot read the end of {topic}[{partition}]: {error.str()}")
            if code in _STALE_METADATA:
                for stale in sorted({t for t, _ in errors}):
                    clients.refresh_metadata(consumer, stale)
            clock.sleep(pause)
            pause = min(2 * pause, LAST_RETRY)
            wanted = list(errors)
    return {where: (found[0][where], found[1][where], found[2][where]) for where in partitions}
