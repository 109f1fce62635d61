"""The status topic's ``transform/<poller>`` records, as pure functions: what a runner writes
after its keys published, and how a record reads back."""

from __future__ import annotations

import pytest

from watukuy.control.transformrecords import (
    TransformRecord,
    decode_transform,
    transform_record,
    transforms_to_record,
)
from watukuy.core.errors import StateCorrupted

pytestmark = pytest.mark.unit


def test_a_record_is_written_only_when_the_fingerprint_differs_from_the_recorded_one() -> None:
    recorded = {"same": "f1", "changed": "f1", "dropped": "f1"}
    running = {"same": "f1", "changed": "f2", "dropped": None, "plain": None, "new": "f3"}
    written = transforms_to_record([*running, "removed-meanwhile"], recorded, running, 5.0)
    assert written == [
        TransformRecord("changed", "f2", 5.0),
        TransformRecord("dropped", None, 5.0),  # published without its former transform
        TransformRecord("new", "f3", 5.0),
    ]  # "plain" never had one; "removed-meanwhile" is not running here: its fingerprint is unknown


def test_a_record_reads_back_and_other_keys_are_not_records() -> None:
    key, value = transform_record(TransformRecord("tracker.users", None, 12.5))
    assert key == b"transform/tracker.users"
    assert decode_transform(key, value) == TransformRecord("tracker.users", None, 12.5)
    assert decode_transform(b"topic/tracker/events.x", value) is None
    assert decode_transform(key, None) is None
    with pytest.raises(StateCorrupted, match=r"poller tracker\.users"):
        decode_transform(key, b'{"format_version": 1, "fingerprint": 7, "at": 1}')
