"""The Java client's key partitioner, so co-partitioning agrees with every other Kafka tool.

``state``, ``items`` and ``parked`` records of one key (``poller/partition``) must land in the
same Kafka partition of each topic: the one the group assignment of ``<prefix>.state`` makes
this instance own. librdkafka's default partitioner (``consistent_random``, CRC32) differs from
the Java client's; producers are configured with ``partitioner: murmur2_random`` and records
are given the partition computed here explicitly, which is the same number.
"""

from __future__ import annotations

import functools
import struct

__all__ = ["murmur2", "partition_for"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """``org.apache.kafka.common.utils.Utils.murmur2``: MurmurHash2, seed 0x9747b28c.

    The result is the signed 32-bit int Java returns (e.g. ``murmur2(b"21") == -973932308``).
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    words = length >> 2
    if words:
        for k in struct.unpack_from(f"<{words}I", data):
            k = (k * _M) & _MASK
            k ^= k >> _R
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


@functools.lru_cache(maxsize=65536)
def partition_for(key: str, partitions: int) -> int:
    """Kafka partition of ``key`` among ``partitions``, as the Java producer picks it.

    ``Utils.toPositive(Utils.murmur2(key.getBytes(UTF_8))) % partitions``.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions
