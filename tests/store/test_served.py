"""What an owner says it served, as offset metadata: read back, or refused for what it is not."""

from __future__ import annotations

import pytest

from watukuy.store.kafka.served import decode, encode

pytestmark = pytest.mark.unit


def test_what_is_said_is_read_back_exactly() -> None:
    for until in (0.0, 1_800_000_000.123456, 1e12):
        assert decode(encode(until)) == until
    assert len(encode(1_800_000_000.123456)) < 100  # brokers keep 4 KB of metadata


@pytest.mark.parametrize(
    "metadata",
    [None, "", "not json", "[1]", '{"other": 1}', '{"served_until": "soon"}',
     '{"served_until": true}', '{"served_until": NaN}', '{"served_until": Infinity}'],
)  # fmt: skip
def test_anything_else_says_nothing(metadata: str | None) -> None:
    """An earlier release's offsets (no metadata), or another writer's: the stored due times
    then stand, and a takeover polls what is due at once, as it always did."""
    assert decode(metadata) is None
