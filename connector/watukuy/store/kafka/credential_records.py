"""The records of ``<prefix>.credentials`` as the Kafka credential store writes and reads
them (:mod:`.credentials`): their keys, the key-id header, what the tail thread hands over,
and the delivery report that settles a write.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError

from watukuy.core.errors import Retriable

__all__ = ["CLAIM", "GRANT", "KEY_ID_HEADER", "Read", "read_of", "settle", "tail"]

KEY_ID_HEADER = "key-id"
GRANT = "grant/"
"""``grant/<connector>/<tenant>``: the grant, encrypted."""
CLAIM = "claim/"
"""``claim/<connector>/<tenant>/<serial>``: a refresh claim, plain JSON."""
_log = logging.getLogger("watukuy.credentials")


@dataclass(frozen=True, slots=True)
class Read:
    """One record the tail read (``key`` None: the end of a partition was reached)."""

    partition: int
    next_offset: int
    key: bytes | None = None
    value: bytes | None = None
    key_id: str | None = None


def tail(
    consumer: Consumer, topic: str, stop: threading.Event, hand_over: Callable[[list[Read]], object]
) -> None:
    """The tail thread: hands what ``consumer`` reads to ``hand_over``, in order, until
    ``stop`` is set or ``hand_over`` raises ``RuntimeError`` (its event loop is closed)."""
    while not stop.is_set():
        try:
            messages = consumer.consume(500, 0.05)
        except Exception as exc:  # librdkafka gave up on something: say so, go on
            _log.warning("reading %s: %s", topic, exc)
            stop.wait(0.5)
            continue
        batch = [read for m in messages if (read := read_of(m, topic)) is not None]
        if batch:
            try:
                hand_over(batch)
            except RuntimeError:  # the loop is closed: nobody is left to read for
                return


def read_of(message: Any, topic: str) -> Read | None:
    error = message.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            return Read(message.partition(), message.offset())
        _log.warning("reading %s: %s", topic, error.str())
        return None
    kid = next(
        (
            (v or b"").decode("ascii", "replace")
            for k, v in message.headers() or ()
            if k == KEY_ID_HEADER
        ),
        None,
    )
    return Read(message.partition(), message.offset() + 1, message.key(), message.value(), kid)


def settle(
    future: asyncio.Future[int], error: KafkaError | None, offset: int | None, topic: str
) -> None:
    if future.done():
        return
    if error is not None or offset is None:
        why = error.str() if error is not None else "no offset"
        future.set_exception(Retriable(f"a write to {topic} failed: {why}"))
    else:
        future.set_result(offset)
