"""The ``data`` text of an event (orjson) against the canonical JSON it replaced there.

``canonical_json`` below is a frozen copy of the function ``data`` was written with before:
the reference. Ids and fingerprints still use :func:`watukuy.core.events.canonical_json`,
whose bytes must never change (every stored snapshot entry would look changed), so it is held
to the same reference byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, date, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from watukuy.core import events
from watukuy.core.events import Event
from watukuy.serde.events import EventSchemas, data_json, decode_event, encode_event


def canonical_json(value: Any) -> str:
    """The reference: ``canonical_json`` as it was when ``data`` moved to orjson."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)  # any code point but surrogates


def json_values(floats: st.SearchStrategy[float]) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | floats | _TEXT
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
        max_leaves=20,
    )


FINITE = st.floats(allow_nan=False, allow_infinity=False)


@given(json_values(st.nothing()))
def test_data_without_floats_is_the_canonical_text_byte_for_byte(value: Any) -> None:
    assert data_json(value) == canonical_json(value)


@given(json_values(FINITE))
def test_data_with_floats_parses_to_what_the_canonical_text_parses_to(value: Any) -> None:
    assert json.loads(data_json(value)) == json.loads(canonical_json(value))


@given(json_values(st.floats()))
def test_the_id_and_fingerprint_text_stays_the_canonical_one(value: Any) -> None:
    assert events.canonical_json(value) == canonical_json(value)
    expected = hashlib.sha256(canonical_json(value).encode()).hexdigest()[:32]
    assert events.fingerprint(value) == expected


def test_what_orjson_cannot_write_is_written_as_before() -> None:
    for value in ({1: "a", 2: [3]}, {"big": 2**70}, {"neg": -(2**64)}):
        assert data_json(value) == canonical_json(value)


def test_non_ascii_small_floats_and_non_json_values() -> None:
    assert data_json({"ü": "☃", "a": "\u2028"}) == '{"a":"\u2028","ü":"☃"}'
    assert data_json({"x": 1e-05}) == '{"x":0.00001}'
    assert json.loads(data_json({"x": 1e-05})) == {"x": 1e-05}
    assert data_json({"x": math.nan, "y": math.inf}) == '{"x":null,"y":null}'
    moment = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert data_json({"at": moment, "day": date(2024, 5, 1)}) == canonical_json(
        {"at": moment, "day": date(2024, 5, 1)}
    )


@given(json_values(FINITE))
def test_an_encoded_event_decodes_to_its_item(value: Any) -> None:
    schemas = EventSchemas({"p": None})
    event = Event(
        id="i",
        poller="p",
        partition="k",
        subject="s",
        type="created",
        version="v",
        sequence=1,
        time=datetime(2024, 5, 1, tzinfo=UTC),
        lane="live",
        schema_version=1,
        data={"item": value},
    )
    decoded = decode_event(encode_event(event, schemas), schemas.resolve)
    assert decoded.data == json.loads(canonical_json({"item": value}))
