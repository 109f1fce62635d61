"""What ``validate`` shows of a declarative poller: no credential and no partition data, even
written inline; templates and everything else as written."""

from __future__ import annotations

from typing import Any

import pytest

from watukuy.declarative.shown import shown

pytestmark = pytest.mark.unit

CANARY = "canary-4f2a"


def entry() -> dict[str, Any]:
    auth = {"oauth2": {"token_url": "https://a.test/t", "client_id": "c", "client_secret": CANARY}}
    return {
        "name": "tickets",
        "partitions": {
            "static": [{"key": "acme", "data": {"slug": f"slug-{CANARY}", "token": CANARY}}],
            "refresh": "5m",
        },
        "request": {
            "url": "https://api.test/{partition.data.slug}/items",
            "headers": {"Accept": "application/json", "X-Api-Key": CANARY},
            "auth": auth,
        },
        "records": "data",
        "identity": "id",
    }


@pytest.mark.parametrize(
    "auth",
    [
        {"bearer": CANARY},
        {"basic": {"username": "user", "password": CANARY}},
        {"api_key": {"header": "X-Key", "value": CANARY}},
        {"oauth2": {"token_url": "https://a.test/t", "client_id": "c", "client_secret": CANARY}},
    ],
)
def test_no_credential_or_partition_data_is_shown(auth: dict[str, Any]) -> None:
    given = entry()
    given["request"]["auth"] = auth
    given["partitions"]["http"] = {"url": "https://a.test/tenants", "key": "id", "auth": auth}

    text = repr(shown(given))

    assert CANARY not in text
    assert "[redacted]" in text


def test_everything_else_is_shown_as_written() -> None:
    out = shown(entry())

    assert out["request"]["url"] == "https://api.test/{partition.data.slug}/items"
    assert out["request"]["headers"]["Accept"] == "application/json"
    assert out["partitions"]["static"][0]["key"] == "acme"
    assert out["request"]["auth"]["oauth2"]["client_id"] == "c"
    assert out["records"] == "data"


def test_a_connector_with_streams_hides_the_same_in_defaults_and_each_stream() -> None:
    poller = entry()
    connector = {
        "name": "tracker",
        "partitions": poller["partitions"],
        "defaults": {"request": {"base": "https://api.test", "auth": {"bearer": CANARY}}},
        "streams": [
            {"name": "a", "request": {"path": "/a", "headers": {"X-Api-Key": CANARY}}},
            {"name": "b", "request": poller["request"], "identity": "id"},
        ],
    }

    out = shown(connector)

    assert CANARY not in repr(out)
    assert out["defaults"]["request"]["base"] == "https://api.test"
    assert out["streams"][0]["request"]["path"] == "/a"
    assert out["streams"][1]["request"]["auth"]["oauth2"]["client_id"] == "c"
