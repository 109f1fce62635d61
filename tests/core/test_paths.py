"""One path grammar (watukuy.core.paths) for every place a config names a value: bodies,
items, filters and transforms read the same ``a.b[0]["c.d"]`` and refuse the same mistakes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.errors import ConfigError, PathMissing
from watukuy.core.filters import compile_filter
from watukuy.core.paths import MISSING, parse_key_path, parse_path

pytestmark = pytest.mark.unit

BODY: dict[str, Any] = {
    "data": {"items": [{"id": 1}, {"id": 2, "tags": ["a", "b"]}]},
    "meta": {"next.link": "/p2"},
    "@odata.nextLink": "/p3",
    "errors": [{"code": "CursorExpired"}],
}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("data.items[0].id", 1),
        ("data.items[-1].tags[1]", "b"),
        ('meta["next.link"]', "/p2"),
        ("['@odata.nextLink']", "/p3"),
        ("errors[0].code", "CursorExpired"),
        ("data.items[5].id", MISSING),
        ("data.nothing", MISSING),
        ("data.items.id", MISSING),  # a list has no keys
    ],
)
def test_a_path_finds_what_is_there_and_missing_otherwise(text: str, found: Any) -> None:
    assert parse_path(text, "p").find(BODY) == found


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a..b", "a name is missing before '.'"),
        ("a.", "a name is missing after '.'"),
        ("a.[0]", "write a[0], not a.[0]"),
        ("a[x]", "expected [n], [*] or"),
        ("a b", "unexpected ' '"),
        ("a[0]b", "expected '.' or '['"),
        ("items[*].id", "[*] is allowed in records only"),
    ],
)
def test_a_bad_path_is_a_config_error_naming_the_field_and_the_character(
    text: str, why: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_path(text, "pollers[0].identity")
    assert raised.value.path == "pollers[0].identity"
    assert why in str(raised.value)


def test_every_spreads_a_list_into_its_elements_sub_paths() -> None:
    path = parse_path('list[*].customer["full name"]', "records", every=True)
    spread = path.spread()
    assert spread is not None
    head, tail = spread
    assert (head.text, tail.text) == ("list", 'customer["full name"]')
    body = {"list": [{"customer": {"full name": "Ada"}}, {"other": 1}]}
    assert [tail.find(element) for element in head.find(body)] == ["Ada", MISSING]
    assert parse_path("data", "records", every=True).spread() is None
    with pytest.raises(ConfigError, match="at most one"):
        parse_path("a[*].b[*]", "records", every=True)
    with pytest.raises(ValueError, match="spread"):
        path.find(body)


def test_a_spread_at_the_top_or_the_end_names_the_body_or_the_element() -> None:
    head, tail = parse_path("[*]", "records", every=True).spread() or (None, None)
    assert head is not None and tail is not None
    assert (head.text, tail.text) == ("", "")
    assert head.find([1, 2]) == [1, 2] and tail.find({"x": 1}) == {"x": 1}


def test_transforms_take_keys_alone() -> None:
    assert parse_key_path("reporter.email", "t.drop[0]").steps == ("reporter", "email")
    with pytest.raises(ConfigError, match="only keys here"):
        parse_key_path("tags[0]", "t.drop[0]")


def test_filters_read_indexes_as_bodies_do() -> None:
    expired = compile_filter({"path": "errors[0].code", "equals": "CursorExpired"}, "w")
    assert expired(BODY) and not expired({"errors": []})


def test_get_names_the_path_never_the_values() -> None:
    with pytest.raises(PathMissing) as raised:
        parse_path("customer.id", "identity").get({"customer": {"email": "ada@example.com"}})
    assert "customer.id" in str(raised.value) and "ada@" not in str(raised.value)


# A key holding both quote characters cannot be written in this grammar (none is escaped).
keys = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8).filter(
    lambda key: not ('"' in key and "'" in key)
)


@given(st.lists(st.one_of(keys, st.integers(-3, 3)), min_size=1, max_size=5))
def test_a_spread_writes_paths_the_parser_reads_back(steps: list[Any]) -> None:
    # Every step list, written as text by spread() around a [*], parses back to itself.
    path = parse_path("x[*]", "r", every=True)
    built = type(path)(path.text, (*steps, path.steps[1]))
    head, _ = built.spread() or (None, None)
    assert head is not None
    if head.text:
        assert parse_path(head.text, "r").steps == tuple(steps)
