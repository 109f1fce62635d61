"""The sequence number of an event, read by hand from the head of its envelope.

Why not fastavro (:func:`~watukuy.serde.events.published_event`): a restore's catch-up reads
every event its keys published in the last ``SLACK`` seconds before their newest state, which
for a big tenant's backlog is hundreds of thousands of events, and fastavro's reader costs
about 6 µs an event (a ``BytesIO``, a schema walk and a datetime per call); on the restore's
thread that tripled the restore of the partition holding the big tenants (issue 42). Nearly all
of those events are accounted for by the key's stored state (their sequence is at most its
sequence): knowing that takes their sequence number alone, read here in about 1 µs. An event
beyond the state is decoded by :func:`~watukuy.serde.events.published_event` as before.

The envelope's first fields (``schemas/event.avsc``) are ``id``, ``poller``, ``partition``,
``subject`` (strings), ``type`` (an enum of three), ``version`` (a string), ``sequence`` and
``time`` (longs): Avro writes a string as its length (a zigzag varint) and its bytes, an enum
as its index, a long as a zigzag varint. Anything else (another encoding, a head of another
key, a length or an index out of range, a string that is not UTF-8, a body cut short) gives
``None``, and the caller takes fastavro's path, which reads the event or says why it cannot.
Tests compare both readers on the same bytes (tests/serde/test_serde_event_head.py).
"""

from __future__ import annotations

from watukuy.serde.binary import strings
from watukuy.serde.framing import HEADER, MAGIC

__all__ = ["event_sequence", "key_head"]

_CONFLUENT_MAGIC = 0
_CONFLUENT_HEADER = 5  # the magic byte and a 4-byte schema id
_EVENT_TYPES = 3
# ``time`` is a timestamp-millis: fastavro makes a datetime of it, which refuses years out of
# 1..9999 (milliseconds since the epoch).
_TIME_MIN = -62_135_596_800_000
_TIME_MAX = 253_402_300_799_999


def key_head(poller: str, partition: str) -> bytes | None:
    """What follows the ``id`` of every event of ``poller/partition``: its two strings, as Avro
    writes them (``None``: a name the writer's fast path does not take, such as a lone
    surrogate; its events are then read by fastavro)."""
    try:
        return strings(poller, partition)
    except UnicodeEncodeError:
        return None


def event_sequence(raw: bytes, head: bytes) -> int | None:
    """The ``sequence`` of an event whose envelope names the key ``head`` stands for
    (:func:`key_head`); ``None`` when this reader does not follow it (see the module)."""
    if raw[:2] == MAGIC:
        at = HEADER
    elif raw[:1] and raw[0] == _CONFLUENT_MAGIC:
        at = _CONFLUENT_HEADER
    else:
        return None
    end = len(raw)
    # Written out rather than a call per field: this runs for every event a catch-up reads.
    # Lengths below 64 are one byte (zigzag: twice the length); longer ones take _long.
    try:
        n = raw[at]
        n, at = (n >> 1, at + 1) if n < 0x80 and not n & 1 else _long(raw, at)
        stop = at + n  # id
        if n < 0 or stop > end or not raw.startswith(head, stop):
            return None
        ident = raw[at:stop]
        at = stop + len(head)
        n = raw[at]
        n, at = (n >> 1, at + 1) if n < 0x80 and not n & 1 else _long(raw, at)
        stop = at + n  # subject
        if n < 0 or stop >= end:
            return None
        subject = raw[at:stop]
        kind = raw[stop]  # one byte: the zigzag of an index 0..2
        if kind >= 2 * _EVENT_TYPES or kind & 1:
            return None
        at = stop + 1
        n = raw[at]
        n, at = (n >> 1, at + 1) if n < 0x80 and not n & 1 else _long(raw, at)
        stop = at + n  # version
        if n < 0 or stop > end:
            return None
        version = raw[at:stop]
        sequence, at = _long(raw, stop)
        time, at = _long(raw, at)  # read, so a body cut before it is refused
        if at > end or not _TIME_MIN <= time <= _TIME_MAX:
            return None
        ident.decode(), subject.decode(), version.decode()  # fastavro refuses what is not UTF-8
    except (IndexError, UnicodeDecodeError):  # a varint running past the end, or not UTF-8
        return None
    return sequence


def _long(raw: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint at ``at``, and where the next field starts (IndexError: cut short)."""
    byte = raw[at]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), at + 1
    z = byte & 0x7F
    shift = 7
    while True:
        at += 1
        byte = raw[at]
        z |= (byte & 0x7F) << shift
        if byte < 0x80:
            if z >> 64:  # ten bytes can say more than a long holds: not ours to read
                raise IndexError("a varint past a long's 64 bits")
            return (z >> 1) ^ -(z & 1), at + 1
        shift += 7
        if shift > 63:
            raise IndexError("a varint longer than a long")
