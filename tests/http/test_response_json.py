"""``Response.json()`` builds what :func:`json.loads` builds from any body, though a faster parser
reads most of them: a vendor's ids and amounts reach Kafka exactly as they were sent."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.http import InvalidResponse
from watukuy.http.response import Response


def answer(body: bytes) -> Response:
    return Response(status=200, headers={}, url="https://api.test/items", body=body)


def same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down (1 == 1.0, but an id must stay an int)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans())
async def test_any_json_body_parses_to_what_the_standard_parser_builds(
    value: Any, ascii_only: bool
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()

    assert same(await answer(body).json(), json.loads(body))


@pytest.mark.parametrize(
    "body",
    [
        b'{"id": 123456789012345678901234567890}',  # beyond 64 bits: stays an exact int
        b"[-9223372036854775809, 18446744073709551616]",
        b'{"total": NaN, "max": Infinity}',  # not JSON, but Python's parser and vendors use it
        b"[1e400]",
        b'"\\ud800"',  # a lone surrogate escaped
        b'\xef\xbb\xbf{"a": 1}',  # a byte order mark
        '{"name": "Zoë"}'.encode("utf-16"),
        b'{"a": 1, "a": 2}',  # the last of a repeated name, as json.loads keeps
        b'  {"a": -0.0, "b": 1E5}  ',
    ],
)
async def test_bodies_a_fast_parser_refuses_parse_as_before(body: bytes) -> None:
    assert same(await answer(body).json(), json.loads(body))


@pytest.mark.parametrize("body", [b'{"items": [1, ', b"[] trailing", b"\xff\xfe\xfd", b""])
async def test_a_body_that_is_not_json_is_an_invalid_response_naming_no_content(
    body: bytes,
) -> None:
    with pytest.raises(InvalidResponse) as caught:
        await answer(body).json()

    assert "malformed JSON" in str(caught.value)
    assert "items" not in str(caught.value)
