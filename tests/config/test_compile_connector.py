"""A REST connector's config is compiled by ``compile_connector``: its errors name the field
and never quote a resolved ``${env:...}`` value (found by the secrets fault scenario: a bad
duration from the environment came back in the 400 answer and in the validate report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from watukuy.control.connectors import compile_connector
from watukuy.core.errors import ConfigError

pytestmark = pytest.mark.unit

CANARY = "cnry-7f3a9c2e5b1d4f60"


def connector(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "partitions": {"static": [{"key": "t1", "data": {"slug": "acme"}}]},
        "request": {"url": "http://127.0.0.1:9/{partition.data.slug}/items"},
        "records": "data",
        "identity": "id",
    }
    return config | changes


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"schedule": {"min": "${env:WATUKUY_TEST_SECRET}"}}, "schedule.min"),
        ({"request": {"url": "${env:WATUKUY_TEST_SECRET}/items"}}, "request.url"),
        ({"retain": "${env:WATUKUY_TEST_SECRET}"}, "retain"),
    ],
)
def test_a_refused_env_value_is_named_not_quoted(
    monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any], path: str
) -> None:
    monkeypatch.setenv("WATUKUY_TEST_SECRET", CANARY)
    with pytest.raises(ConfigError) as raised:
        compile_connector("orders", connector(**changes), Path("."))
    assert raised.value.path == path
    assert CANARY not in str(raised.value)


def test_a_literal_value_is_still_quoted() -> None:
    with pytest.raises(ConfigError, match="'soon'") as raised:
        compile_connector("orders", connector(schedule={"min": "soon"}), Path("."))
    assert raised.value.path == "schedule.min"
