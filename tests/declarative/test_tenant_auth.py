"""Per-tenant auth kinds (issue 45): ``oauth2`` with ``grant: refresh_token`` and ``session``,
as the vendor and its token endpoint see them, on a scripted transport."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, spec
from watukuy import Partition
from watukuy.core.errors import ConfigError, NeedsAuthorization
from watukuy.core.grants import GrantRef, Reauthorize
from watukuy.declarative.errors import OAuthUnavailable, StatusFailed
from watukuy.engine.credentials import Vault
from watukuy.http import Request, reply
from watukuy.store.credentials.memory import MemoryCredentials

pytestmark = pytest.mark.unit

ITEMS = f"{API}/items"
TOKEN_URL = "https://auth.test/oauth/token"
LOGIN = "https://auth.test/login"
FIRST = "rt-first-5c1"
TENANT = Partition("acme", {"refresh_token": FIRST, "user": "ann", "password": "pw-77"})
STATIC = {"static": [{"key": "acme", "data": {"refresh_token": FIRST}}]}
REFRESH = {
    "oauth2": {
        "grant": "refresh_token",
        "token_url": TOKEN_URL,
        "client_id": "app-1",
        "client_secret": "app-secret",
        "refresh_token": "{partition.data.refresh_token}",
        "refresh_early": "60s",
    }
}


def driver_for(auth: dict[str, Any]) -> Driver:
    entry = spec(partitions=STATIC, request={"url": ITEMS, "auth": auth})
    driver = Driver(compile_spec(entry), partition=TENANT)
    driver.credentials = Vault(MemoryCredentials(), runner="r1", wait_max=0.0)
    return driver


def rotating(expires_in: int = 600) -> Any:
    """A token endpoint that rotates the refresh token at every use (rt-1, rt-2, ...)."""
    issued = iter(range(1, 1000))

    def answer(request: Request) -> Any:
        n = next(issued)
        return reply(
            json={
                "access_token": f"at-{n}",
                "token_type": "bearer",
                "expires_in": expires_in,
                "refresh_token": f"rt-{n}",
            }
        )

    return answer


def form_of(request: Request) -> dict[str, str]:
    return dict(parse_qsl((request.body or b"").decode()))


def sent(driver: Driver, url: str) -> list[Request]:
    return [r for r in driver.transport.requests if str(r.url).startswith(url)]


async def test_the_grant_is_refreshed_with_the_rotated_token_never_the_first_again() -> None:
    driver = driver_for(REFRESH)
    driver.transport.add("POST", TOKEN_URL, handler=rotating(600))
    driver.transport.add("GET", ITEMS, json={"data": []})
    await driver.poll()
    await driver.poll()  # within the token's life: no refresh
    driver.clock.advance(600 - 60)  # refresh_early before expiry
    await driver.poll()
    tokens = sent(driver, TOKEN_URL)
    assert [form_of(r)["refresh_token"] for r in tokens] == [FIRST, "rt-1"]
    assert {form_of(r)["grant_type"] for r in tokens} == {"refresh_token"}
    basic = base64.b64decode(tokens[0].headers["Authorization"].split()[1]).decode()
    assert basic == "app-1:app-secret"
    assert [r.headers["Authorization"] for r in sent(driver, ITEMS)] == [
        "Bearer at-1",
        "Bearer at-1",
        "Bearer at-2",
    ]
    assert driver.credentials is not None
    stored = await driver.credentials.store.load(GrantRef("tickets", "acme"))
    assert stored is not None and stored.refresh_token == "rt-2" and stored.serial == 2


async def test_a_401_renews_the_token_once_and_sends_the_request_once_more() -> None:
    driver = driver_for(REFRESH)
    driver.transport.add("POST", TOKEN_URL, handler=rotating())
    driver.transport.add("GET", ITEMS, reply(401), reply(200, json={"data": [{"id": 1}]}))
    assert await driver.poll() == [{"id": 1}]
    assert [r.headers["Authorization"] for r in sent(driver, ITEMS)] == [
        "Bearer at-1",
        "Bearer at-2",
    ]
    # A 401 to the renewed token too is the vendor's answer: not a loop of refreshes.
    driver.transport.add("GET", ITEMS, reply(401))
    with pytest.raises(StatusFailed, match="401"):
        await driver.poll()
    assert len(sent(driver, TOKEN_URL)) == 3  # one renewal per request, no more


async def test_invalid_grant_makes_the_tenant_need_authorising_and_nothing_is_sent_after() -> None:
    driver = driver_for(REFRESH)
    driver.transport.add("POST", TOKEN_URL, reply(400, json={"error": "invalid_grant"}))
    driver.transport.add("GET", ITEMS, json={"data": []})
    with pytest.raises(NeedsAuthorization, match="invalid_grant") as raised:
        await driver.poll()
    assert FIRST not in str(raised.value)
    with pytest.raises(NeedsAuthorization):
        await driver.poll()
    assert len(sent(driver, TOKEN_URL)) == 1 and sent(driver, ITEMS) == []
    assert driver.credentials is not None
    stored = await driver.credentials.store.load(GrantRef("tickets", "acme"))
    assert stored is not None and stored.needs_authorization is Reauthorize.INVALID_GRANT
    # A new grant handed in: the next poll refreshes with it.
    driver.transport.add("POST", TOKEN_URL, handler=rotating())
    await driver.credentials.hand_in(GrantRef("tickets", "acme"), "rt-new", driver.clock.now())
    await driver.poll()
    assert form_of(sent(driver, TOKEN_URL)[-1])["refresh_token"] == "rt-new"


async def test_a_failing_token_endpoint_is_retried_with_the_same_grant() -> None:
    driver = driver_for(REFRESH)
    driver.transport.add("POST", TOKEN_URL, reply(503), reply(200, json={"access_token": "at-9"}))
    driver.transport.add("GET", ITEMS, json={"data": []})
    with pytest.raises(OAuthUnavailable, match="503"):
        await driver.poll()
    await driver.poll()
    assert [form_of(r)["refresh_token"] for r in sent(driver, TOKEN_URL)] == [FIRST, FIRST]
    assert sent(driver, ITEMS)[0].headers["Authorization"] == "Bearer at-9"


async def test_a_session_logs_in_once_and_again_after_a_401() -> None:
    auth = {
        "session": {
            "login": {
                "url": LOGIN,
                "body": {
                    "username": "{partition.data.user}",
                    "password": "{partition.data.password}",
                },
            },
            "token": {"path": "token"},
            "header": {"X-Session": "{session.token}"},
            "expires": "30m",
        }
    }
    driver = driver_for(auth)
    logins = iter(range(1, 100))
    driver.transport.add(
        "POST", LOGIN, handler=lambda r: reply(json={"token": f"s-{next(logins)}"})
    )
    driver.transport.add(
        "GET", ITEMS, reply(200, json={"data": []}), reply(401), reply(200, json={"data": []})
    )
    await driver.poll()
    await driver.poll()
    assert [r.headers["X-Session"] for r in sent(driver, ITEMS)] == ["s-1", "s-1", "s-2"]
    [first, _] = sent(driver, LOGIN)
    assert first.body is not None and b'"password": "pw-77"' in first.body


@pytest.mark.parametrize(
    ("auth", "path"),
    [
        (
            {"oauth2": {**REFRESH["oauth2"], "refresh_token": None}},
            "request.auth.oauth2.refresh_token",
        ),
        (
            {"oauth2": {**REFRESH["oauth2"], "expires": {"format": "days"}}},
            "request.auth.oauth2.expires.format",
        ),
        (
            {"oauth2": {**REFRESH["oauth2"], "refresh_early": "soon"}},
            "request.auth.oauth2.refresh_early",
        ),
        ({"oauth2": {**REFRESH["oauth2"], "grant": "password"}}, "request.auth.oauth2.grant"),
        (
            {
                "oauth2": {
                    "token_url": TOKEN_URL,
                    "client_id": "a",
                    "refresh_early": "1m",
                    "client_secret": "s",
                }
            },
            "request.auth.oauth2.refresh_early",
        ),
        (
            {
                "session": {
                    "login": {"url": LOGIN},
                    "token": {"path": "t"},
                    "header": {"X": "plain"},
                }
            },
            "request.auth.session.header.X",
        ),
    ],
)
def test_a_bad_key_is_named_by_its_path(auth: dict[str, Any], path: str) -> None:
    oauth = auth.get("oauth2")
    if isinstance(oauth, dict):
        auth = {"oauth2": {k: v for k, v in oauth.items() if v is not None}}
    entry = spec(partitions=STATIC, request={"url": ITEMS, "auth": auth})
    with pytest.raises(ConfigError) as raised:
        compile_spec(entry)
    assert raised.value.path == f"pollers[0].{path}", raised.value


def test_a_tenants_listing_cannot_keep_tenants_grants() -> None:
    listing = {
        "http": {
            "url": f"{API}/tenants",
            "records": "data",
            "key": "id",
            "auth": {"oauth2": {**REFRESH["oauth2"]}},
        }
    }
    with pytest.raises(ConfigError) as raised:
        compile_spec(spec(partitions=listing))
    assert raised.value.path is not None and raised.value.path.startswith(
        "pollers[0].partitions.http.auth.oauth2"
    )
