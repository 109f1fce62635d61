"""Paginators, cursors and auth are tables of kinds: each kind the key table (the config
reference) lists has its parser, and a kind without one is a ConfigError naming it, never a
KeyError."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from watukuy.core.errors import ConfigError
from watukuy.declarative.auth import AUTH_KINDS
from watukuy.declarative.cursors import CURSORS
from watukuy.declarative.paging import PAGINATORS
from watukuy.declarative.values import alternatives, parse_kind

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("path", "table"),
    [
        ("paginate", PAGINATORS),
        ("partitions.http.paginate", PAGINATORS),
        ("cursor", CURSORS),
        ("request.auth", AUTH_KINDS),
        ("partitions.http.auth", AUTH_KINDS),
    ],
)
def test_every_kind_the_reference_lists_has_a_parser(
    path: str, table: Mapping[str, object]
) -> None:
    assert set(alternatives(path)) == set(table)


def test_a_listed_kind_without_a_parser_is_a_config_error_naming_it() -> None:
    half: dict[str, Callable[[object, str, str], object]] = {"page": lambda *args: "parsed"}
    assert parse_kind({"page": {}}, "paginate", "pollers[0].paginate", half) == "parsed"
    with pytest.raises(ConfigError) as raised:
        parse_kind({"offset": {}}, "paginate", "pollers[0].paginate", half)
    assert raised.value.path == "pollers[0].paginate.offset"
    assert "not supported" in str(raised.value)
