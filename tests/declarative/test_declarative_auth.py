"""``auth``: what the vendor receives for each kind, and OAuth2's token cache."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, query_of, spec
from watukuy import Partition
from watukuy.declarative.errors import OAuthError, OAuthUnavailable, StatusFailed
from watukuy.http import Request, reply
from watukuy.http.scripted import Unreachable

ITEMS = f"{API}/items"
TOKEN_URL = "https://auth.test/oauth/token"
TENANT = Partition("acme", {"token": "t-acme", "user": "ann", "password": "pa:ss", "id": "c-1"})
STATIC = {"static": [{"key": "acme", "data": {"token": "x"}}]}


def driver_for(auth: dict[str, Any], **overrides: Any) -> Driver:
    entry = spec(
        partitions=STATIC,
        request={"url": ITEMS, "query": {"limit": 10}, "auth": auth},
        **overrides,
    )
    driver = Driver(compile_spec(entry), partition=TENANT)
    driver.transport.add("GET", ITEMS, json={"data": []})
    return driver


def basic_of(request: Request) -> tuple[str, str]:
    scheme, _, encoded = request.headers["Authorization"].partition(" ")
    assert scheme == "Basic"
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    return user, password


async def test_bearer() -> None:
    driver = driver_for({"bearer": "{partition.data.token}"})
    await driver.poll()
    assert driver.transport.requests[0].headers["Authorization"] == "Bearer t-acme"


async def test_basic() -> None:
    driver = driver_for(
        {"basic": {"username": "{partition.data.user}", "password": "{partition.data.password}"}}
    )
    await driver.poll()
    assert basic_of(driver.transport.requests[0]) == ("ann", "pa:ss")


async def test_api_key_in_a_header() -> None:
    driver = driver_for({"api_key": {"header": "X-Api-Key", "value": "k-{partition.key}"}})
    await driver.poll()
    request = driver.transport.requests[0]
    assert request.headers["X-Api-Key"] == "k-acme"
    assert "Authorization" not in request.headers


async def test_api_key_in_the_query() -> None:
    driver = driver_for({"api_key": {"query": "api_key", "value": "{partition.data.token}"}})
    await driver.poll()
    assert query_of(driver.transport.requests[0]) == {"limit": "10", "api_key": "t-acme"}


async def test_auth_wins_over_a_configured_header_of_any_case() -> None:
    entry = spec(
        request={
            "url": ITEMS,
            "headers": {"authorization": "Bearer stale", "Accept": "application/json"},
            "auth": {"bearer": "fresh"},
        }
    )
    driver = Driver(compile_spec(entry))
    driver.transport.add("GET", ITEMS, json={"data": []})
    await driver.poll()
    headers = driver.transport.requests[0].headers
    assert headers.getall("Authorization") == ["Bearer fresh"]  # type: ignore[attr-defined]
    assert headers["Accept"] == "application/json"


async def test_a_missing_data_name_fails_naming_the_field_not_the_data() -> None:
    driver = driver_for({"bearer": "{partition.data.secret}"})
    with pytest.raises(Exception) as caught:
        await driver.page()
    text = str(caught.value)
    assert "pollers[0].request.auth.bearer: the partition's data has no 'secret'" in text
    assert "t-acme" not in text and "pa:ss" not in text
    assert driver.transport.requests == []


# -- OAuth2 -----------------------------------------------------------------------------------

OAUTH = {
    "oauth2": {
        "token_url": TOKEN_URL,
        "client_id": "{partition.data.id}",
        "client_secret": "sh-secret",
        "scope": "read:items",
    }
}


def token_reply(token: str, expires_in: Any = 3600) -> Any:
    return reply(json={"access_token": token, "token_type": "Bearer", "expires_in": expires_in})


def form_of(request: Request) -> dict[str, str]:
    return dict(parse_qsl((request.body or b"").decode()))


def token_requests(driver: Driver) -> list[Request]:
    return [r for r in driver.transport.requests if str(r.url) == TOKEN_URL]


def api_requests(driver: Driver) -> list[Request]:
    return [r for r in driver.transport.requests if str(r.url).startswith(ITEMS)]


async def test_oauth2_token_is_fetched_once_and_cached_across_polls() -> None:
    driver = driver_for(OAUTH)
    driver.transport.add("POST", TOKEN_URL, token_reply("tok-1"), token_reply("tok-2"))

    await driver.poll()
    await driver.poll()
    await driver.poll()

    [token_request] = token_requests(driver)
    assert form_of(token_request) == {"grant_type": "client_credentials", "scope": "read:items"}
    assert basic_of(token_request) == ("c-1", "sh-secret")
    assert token_request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert [r.headers["Authorization"] for r in api_requests(driver)] == ["Bearer tok-1"] * 3


async def test_oauth2_client_auth_in_the_body() -> None:
    auth = {"oauth2": {**OAUTH["oauth2"], "client_auth": "body"}}
    driver = driver_for(auth)
    driver.transport.add("POST", TOKEN_URL, token_reply("tok-1"))
    await driver.poll()
    [token_request] = token_requests(driver)
    assert "Authorization" not in token_request.headers
    assert form_of(token_request) == {
        "grant_type": "client_credentials",
        "scope": "read:items",
        "client_id": "c-1",
        "client_secret": "sh-secret",
    }


async def test_oauth2_token_is_fetched_again_after_it_expires() -> None:
    driver = driver_for(OAUTH)
    driver.transport.add("POST", TOKEN_URL, token_reply("tok-1", 600), token_reply("tok-2", "600"))

    await driver.poll()
    driver.clock.advance(500)  # still valid: renewed 30s before it expires, at 570s
    await driver.poll()
    driver.clock.advance(80)  # 580s: inside the last 30s, so renewed
    await driver.poll()

    assert len(token_requests(driver)) == 2
    assert [r.headers["Authorization"] for r in api_requests(driver)] == [
        "Bearer tok-1",
        "Bearer tok-1",
        "Bearer tok-2",
    ]


async def test_oauth2_token_is_fetched_again_after_a_401_and_the_request_retried_once() -> None:
    driver = driver_for(OAUTH)
    driver.transport.add(
        "POST", TOKEN_URL, token_reply("tok-1"), token_reply("tok-2"), token_reply("tok-3")
    )
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": [{"id": "a"}]}),
        reply(401, json={"error": "token revoked"}),
        reply(json={"data": [{"id": "b"}]}),
        reply(401),
        reply(401),
    )

    assert [i["id"] for i in await driver.poll()] == ["a"]
    assert [i["id"] for i in await driver.poll()] == ["b"]  # 401, new token, retried
    with pytest.raises(StatusFailed) as caught:  # the retry is refused too: the poll fails
        await driver.poll()

    assert str(caught.value) == "GET https://api.test/items -> 401 (check the credentials)"
    assert [r.headers["Authorization"] for r in api_requests(driver)] == [
        "Bearer tok-1",
        "Bearer tok-1",
        "Bearer tok-2",
        "Bearer tok-2",
        "Bearer tok-3",
    ]
    assert len(token_requests(driver)) == 3


@pytest.mark.parametrize(
    ("answer", "error", "text"),
    [
        (
            reply(401, json={"error": "invalid_client"}),
            OAuthError,
            "oauth2 token request -> 401 (invalid_client)",
        ),
        (
            reply(400, json={"error": "bad scope sh-secret"}),
            OAuthError,
            "oauth2 token request -> 400",
        ),
        (reply(503), OAuthUnavailable, "oauth2 token request -> 503"),
        (
            reply(200, json={"token_type": "bearer"}),
            OAuthError,
            "oauth2 token request -> 200: the answer has no access_token",
        ),
        (
            reply(200, body="<html>"),
            OAuthError,
            "oauth2 token request -> 200: the answer is not a JSON object",
        ),
        (
            reply(200, json={"access_token": "x", "token_type": "mac"}),
            OAuthError,
            "oauth2 token request -> 200: the token type is not bearer",
        ),
        (Unreachable(), OAuthUnavailable, "oauth2 token request failed: connection failed"),
    ],
)
async def test_token_endpoint_failures_fail_the_poll_without_the_secret(
    answer: Any, error: type[Exception], text: str
) -> None:
    driver = driver_for(OAUTH)
    driver.transport.add("POST", TOKEN_URL, answer)
    with pytest.raises(error) as caught:
        await driver.page()
    assert str(caught.value).startswith(text)
    for secret in ("sh-secret", "c-1", "auth.test"):
        assert secret not in str(caught.value)
    assert api_requests(driver) == []
