"""The murmur2 partitioner agrees with the Java client (and librdkafka's murmur2_random)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.store.kafka.partitioner import murmur2, partition_for

# Expected values from Apache Kafka's own test of the Java implementation:
# apache/kafka, clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
JAVA_UTILS_TEST = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# librdkafka's unittest_murmur2 (confluentinc/librdkafka, src/rdmurmur2.c), whose expected values
# are the Java client's results written as unsigned hex; they cover every tail length (0-3 bytes
# after the last whole word) and the empty key.
_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
LIBRDKAFKA_UNITTEST = [
    (b"kafka", 0xD067CF64),
    (b"giberish123456789", 0x8F552B0C),
    (b"1234", 0x9FC97B14),
    (b"234", 0xE7C009CA),
    (b"34", 0x873930DA),
    (b"4", 0x5A4B5CA1),
    (_UNALIGNED, 0x78424F1C),
    (_UNALIGNED[1:], 0x4A62B377),
    (_UNALIGNED[2:], 0xE0E4E09E),
    (_UNALIGNED[3:], 0x62B8B43F),
    (b"", 0x106E08D9),
]


def _signed(value: int) -> int:
    return value - (1 << 32) if value & 0x8000_0000 else value


@pytest.mark.parametrize(("data", "expected"), JAVA_UTILS_TEST)
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), LIBRDKAFKA_UNITTEST)
def test_murmur2_matches_librdkafka_unittest(data: bytes, expected: int) -> None:
    assert murmur2(data) == _signed(expected)


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    assert murmur2(bytearray(b"foobar")) == -790332482
    assert murmur2(memoryview(b"foobar")) == -790332482


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(data: bytes) -> None:
    assert -(1 << 31) <= murmur2(data) < (1 << 31)


def test_partition_for_is_to_positive_modulo() -> None:
    # Utils.toPositive(-973932308) = -973932308 & 0x7fffffff = 1173551340.
    assert partition_for("21", 1_000_000_007) == 1173551340 % 1_000_000_007
    assert partition_for("21", 7) == 1173551340 % 7
    # A positive hash is used as it is.
    assert partition_for("abc", 32) == 479470107 % 32


def test_partition_for_encodes_keys_as_utf8() -> None:
    key = "facturas/año-ü"
    assert partition_for(key, 13) == (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % 13


@given(st.text(max_size=40), st.integers(min_value=1, max_value=1024))
def test_partition_for_is_in_range_and_stable(key: str, partitions: int) -> None:
    partition = partition_for(key, partitions)
    assert 0 <= partition < partitions
    assert partition == (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


def test_partition_for_spreads_keys() -> None:
    counts = [0] * 8
    for i in range(8000):
        counts[partition_for(f"invoices/t_{i}", 8)] += 1
    assert min(counts) > 800  # 1000 expected per partition


def test_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        partition_for("invoices/t_1", 0)


def test_partition_for_agrees_with_librdkafka_murmur2() -> None:
    # confluent-kafka (2.16 here) exposes librdkafka's Java-compatible partition function.
    import confluent_kafka

    native = getattr(confluent_kafka, "murmur2", None)
    if native is None:
        pytest.skip("this confluent-kafka has no murmur2()")
    for partitions in (1, 7, 32, 1_000_003):
        for i in range(2000):
            key = f"invoices/t_{i}"
            assert partition_for(key, partitions) == native(key.encode("utf-8"), partitions)
