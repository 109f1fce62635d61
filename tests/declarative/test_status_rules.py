"""Errors only the body tells apart (issue 43): ``on_status`` rules with ``when`` on the JSON
body, and ``restart`` (an expired page cursor: the listing again from its first page)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, query_of, spec
from watukuy.core.errors import ConfigError
from watukuy.declarative.errors import BadBody, StatusFailed
from watukuy.http import VendorError, reply

ITEMS = f"{API}/items"
NOT_ENABLED = [{"when": {"path": "message", "matches": ".*not enabled.*"}, "do": "ignore"}, "fail"]


def driver(on_status: dict[Any, Any], **overrides: Any) -> Driver:
    return Driver(compile_spec(spec(on_status=on_status, **overrides)))


async def test_a_400_the_body_says_is_a_disabled_feature_is_ignored_another_fails() -> None:
    ignoring = driver({400: NOT_ENABLED})
    ignoring.transport.add(
        "GET",
        ITEMS,
        reply(400, json={"message": "This API operation is not enabled for this site"}),
    )
    assert await ignoring.poll() == []
    assert ignoring.pages[-1].has_more is False

    failing = driver({400: NOT_ENABLED})
    failing.transport.add("GET", ITEMS, reply(400, json={"message": "bad filter syntax"}))
    with pytest.raises(StatusFailed, match="-> 400"):
        await failing.poll()


async def test_a_body_that_is_not_json_matches_no_when_and_takes_the_rest() -> None:
    d = driver({"4xx": NOT_ENABLED})
    d.transport.add("GET", ITEMS, reply(403, body=b"<html>Forbidden</html>"))
    with pytest.raises(StatusFailed, match="-> 403"):
        await d.poll()


async def test_a_200_carrying_errors_is_not_a_page() -> None:
    rules = [{"when": {"path": "errors", "exists": True}, "do": "retry"}, "ok"]
    d = driver({200: rules})
    d.transport.add("GET", ITEMS, reply(200, json={"errors": [{"message": "busy"}], "data": None}))
    with pytest.raises(VendorError):
        await d.poll()


async def test_a_5xx_rule_sees_the_body_the_client_would_otherwise_have_raised_on() -> None:
    d = driver({503: [{"when": {"path": "code", "equals": "maintenance"}, "do": "ignore"}]})
    d.transport.add("GET", ITEMS, reply(503, json={"code": "maintenance"}))
    assert await d.poll() == []


async def test_restart_reads_the_listing_again_from_its_first_page() -> None:
    expired = [
        {"when": {"path": "errors[0].code", "equals": "CursorExpired"}, "do": "restart"},
        "ok",
    ]
    d = driver(
        {200: expired},
        request={"url": ITEMS, "query": {"limit": 2}},
        paginate={"next_token": {"path": "next", "param": "cursor"}},
    )
    d.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": [{"id": 1}, {"id": 2}], "next": "c2"}),
        reply(json={"errors": [{"code": "CursorExpired"}]}),
        reply(json={"data": [{"id": 1}, {"id": 2}], "next": "c2b"}),
        reply(json={"data": [{"id": 3}], "next": None}),
    )
    found = await d.poll()
    assert [i["id"] for i in found] == [1, 2, 1, 2, 3]  # the snapshot sees 1 and 2 unchanged
    assert [query_of(r) for r in d.transport.requests] == [
        {"limit": "2"},
        {"limit": "2", "cursor": "c2"},
        {"limit": "2"},  # again from the first page
        {"limit": "2", "cursor": "c2b"},
    ]


async def test_restart_on_the_first_page_stops_instead_of_asking_it_for_ever() -> None:
    rules = [{"when": {"path": "errors", "exists": True}, "do": "restart"}, "ok"]
    d = driver({200: rules})
    d.transport.add("GET", ITEMS, reply(json={"errors": ["x"]}))
    with pytest.raises(BadBody, match="restart, on the listing's first page"):
        await d.poll()
    assert len(d.transport.requests) == 1


@pytest.mark.parametrize(
    ("on_status", "path", "says"),
    [
        ({400: []}, "pollers[0].on_status.400", "non-empty list"),
        (
            {400: [{"when": {"path": "x", "exists": True}}]},
            "pollers[0].on_status.400[0].do",
            "needs 'do'",
        ),
        ({400: ["ignore", "fail"]}, "pollers[0].on_status.400[1]", "takes the rest"),
        (
            {400: [{"when": {"path": "a..b", "exists": True}, "do": "ok"}]},
            "pollers[0].on_status.400[0].when.path",
            "invalid path",
        ),
        ({400: [{"do": "explode"}]}, "pollers[0].on_status.400[0].do", "must be one of"),
        ({400: [{"do": "ok", "then": 1}]}, "pollers[0].on_status.400[0].then", "unknown"),
    ],
)
def test_a_rule_mistake_names_its_field(on_status: dict[Any, Any], path: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        compile_spec(spec(on_status=on_status))
    assert raised.value.path == path
    assert says in str(raised.value)
