"""Event and SnapshotEntry build as the frozen dataclasses they are: every field set from its
argument, positionally or by name, defaults kept, and nothing settable afterwards."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from watukuy.core.events import Event
from watukuy.core.state import SnapshotEntry

EVENT_VALUES: dict[str, Any] = {
    "id": "e1",
    "poller": "invoices",
    "partition": "t-1",
    "subject": "inv-9",
    "type": "updated",
    "version": "v3",
    "sequence": 41,
    "time": datetime(2026, 12, 1, 3, 0, tzinfo=UTC),
    "lane": "reconcile",
    "schema_version": 2,
    "data": {"id": "inv-9"},
}


@pytest.mark.parametrize("cls", [Event, SnapshotEntry])
def test_the_constructor_takes_exactly_the_fields_in_order(cls: type) -> None:
    """A field added to the class must be added to its __init__ too."""
    parameters = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, field in zip(parameters, fields, strict=True):
        default = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        assert parameter.default == default


def test_an_event_holds_what_it_was_given() -> None:
    by_name = Event(**EVENT_VALUES)
    by_position = Event(*EVENT_VALUES.values())
    assert dataclasses.asdict(by_name) == EVENT_VALUES
    assert by_position == by_name
    assert hash(dataclasses.replace(by_name, data=None)) == hash(
        Event(**EVENT_VALUES | {"data": None})
    )
    assert dataclasses.replace(by_name, sequence=42).sequence == 42
    assert pickle.loads(pickle.dumps(by_name)) == by_name
    with pytest.raises(dataclasses.FrozenInstanceError):
        by_name.sequence = 1  # type: ignore[misc]


def test_a_snapshot_entry_holds_what_it_was_given() -> None:
    assert dataclasses.astuple(SnapshotEntry("v1", 5.0)) == ("v1", 5.0, 0, None)
    entry = SnapshotEntry("v1", 5.0, scan=3, deleted=9.5)
    assert dataclasses.astuple(entry) == ("v1", 5.0, 3, 9.5)
    assert entry == SnapshotEntry("v1", 5.0, 3, 9.5)
    assert dataclasses.replace(entry, deleted=None).deleted is None
    assert pickle.loads(pickle.dumps(entry)) == entry
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.version = "v2"  # type: ignore[misc]
