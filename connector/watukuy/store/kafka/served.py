"""What an owner says it served, kept with the group's offsets of ``<prefix>.state``.

A poll that changes nothing but when its key is next due is not written
(:meth:`watukuy.store.kafka.view.OwnedKeys.idle`), so a key's stored due time can be polls
behind. Each transaction's offsets (``send_offsets_to_transaction``) carry, as the metadata
of each owned partition, the time before which this instance made every poll due
(:meth:`Engine <watukuy.engine.engine.Engine>` says it every few seconds): the group's
coordinator keeps it with the offset, only a member of the current generation can write it
(KIP-447 fences the rest), and the partition's next owner reads it when it restores the
partition, to move its keys' due times on past the polls that were made
(:func:`watukuy.core.schedule.resumed`). A runner with nothing else to commit says it in a
transaction of offsets alone, every :data:`MARK_EVERY` seconds.

Pure, but for :func:`served_of`, which asks the coordinator (on the Kafka thread).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

__all__ = ["MARK_EVERY", "Served", "decode", "encode", "served_of"]

log = logging.getLogger("watukuy.kafka")

MARK_EVERY = 2.0
"""Seconds between transactions of offsets alone, while nothing else is committed: what a
takeover after a crash polls again is at most this much (and an engine's few seconds)."""

_FIELD = "served_until"
FETCH_TIMEOUT = 5.0  # seconds a restore waits for the coordinator's answer, then goes without


@dataclass(frozen=True, slots=True)
class Served:
    """The engine's word: every poll due before ``until`` was made, of every key held while
    ``owned`` (Kafka partition -> lease generation) were the store's partitions."""

    until: float
    owned: Mapping[int, int] = field(default_factory=dict)


def encode(until: float) -> str:
    """The offset metadata that says ``until`` (a few dozen bytes; brokers keep 4 KB)."""
    return json.dumps({_FIELD: until}, separators=(",", ":"))


def decode(metadata: str | None) -> float | None:
    """What ``metadata`` says was served until, or ``None``: none written (an owner of an
    earlier release, or none yet), or not ours to read."""
    if not metadata:
        return None
    try:
        value = json.loads(metadata)
    except ValueError:
        return None
    until = value.get(_FIELD) if isinstance(value, dict) else None
    if isinstance(until, bool) or not isinstance(until, int | float) or not math.isfinite(until):
        return None
    return float(until)


def served_of(group: Consumer | None, topic: str, kafka_partition: int) -> float | None:
    """What the last owner of ``kafka_partition`` said it served (``None``: nothing, or the
    coordinator did not answer in time: the keys' due times are then kept as written, and
    the polls that were not written are made again)."""
    if group is None:
        return None
    try:
        (found,) = group.committed([TopicPartition(topic, kafka_partition)], FETCH_TIMEOUT)
    except (KafkaException, ValueError) as exc:
        log.info("partition %d: what its last owner served is unknown: %s", kafka_partition, exc)
        return None
    return decode(found.metadata)
