"""The credential store contract on the HTTP store, against an endpoint that behaves like a
user's (GET and PUT of JSON, 404 for a tenant it has nothing for), and what its errors show."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tests.store.credentials.contract import CredentialContract, Opener, grant
from watukuy.core.errors import ConfigError, Retriable
from watukuy.core.grants import GrantRef
from watukuy.store.credentials import CredentialStore
from watukuy.store.credentials.http import CredentialsEndpointError, HttpCredentials, check_url
from watukuy.store.credentials.memory import MemoryCredentials

TEMPLATE_PATH = "/apps/{connector}/tenants/{partition.key}/grant"


@dataclass
class Endpoint:
    """The user's system: grants by raw path; ``answer`` forces a status (and body)."""

    url: str = ""
    grants: dict[str, Any] = field(default_factory=dict)
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    answer: tuple[int, str] | None = None

    async def handle(self, request: web.Request) -> web.Response:
        path = request.raw_path
        self.seen.append((request.method, path, dict(request.headers)))
        if self.answer is not None:
            return web.Response(status=self.answer[0], text=self.answer[1])
        if request.method == "GET":
            if path not in self.grants:
                return web.Response(status=404, text="no such tenant")
            return web.json_response(self.grants[path])
        self.grants[path] = await request.json()
        return web.Response(status=204)


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    served = Endpoint()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    served.url = f"http://127.0.0.1:{port}"
    yield served
    await runner.cleanup()


@pytest.fixture
async def opened(endpoint: Endpoint) -> AsyncIterator[list[HttpCredentials]]:
    stores: list[HttpCredentials] = []
    yield stores
    for store in stores:
        await store.close()


class TestHttpCredentials(CredentialContract):
    @pytest.fixture
    def opener(self, endpoint: Endpoint, opened: list[HttpCredentials]) -> Opener:
        claims = MemoryCredentials()  # the claim log every instance of a runner shares

        async def open_() -> CredentialStore:
            store = HttpCredentials(endpoint.url + TEMPLATE_PATH, claims, bearer="hook-secret")
            await store.start()
            opened.append(store)
            return store

        return open_


async def started(endpoint: Endpoint, opened: list[HttpCredentials], **options: Any) -> Any:
    store = HttpCredentials(endpoint.url + TEMPLATE_PATH, MemoryCredentials(), **options)
    await store.start()
    opened.append(store)
    return store


async def test_placeholders_are_quoted_and_auth_is_sent(
    endpoint: Endpoint, opened: list[HttpCredentials]
) -> None:
    store = await started(
        endpoint, opened, method="post", bearer="b-token", headers={"X-App": "watukuy"}
    )
    await store.save(GrantRef("crm", "acme/eu 1"), grant())
    method, path, headers = endpoint.seen[-1]
    assert (method, path) == ("POST", "/apps/crm/tenants/acme%2Feu%201/grant")
    assert headers["Authorization"] == "Bearer b-token"
    assert headers["X-App"] == "watukuy"
    assert endpoint.grants[path] == grant().to_json()


@pytest.mark.parametrize(
    ("status", "body"), [(500, "refresh_token=leaked-in-body"), (403, ""), (302, "")]
)
async def test_a_status_error_names_the_template_never_the_url_or_the_body(
    endpoint: Endpoint, opened: list[HttpCredentials], status: int, body: str
) -> None:
    store = await started(endpoint, opened)
    endpoint.answer = (status, body)
    ref = GrantRef("crm", "tenant-with-a-name")
    for call in (store.load(ref), store.save(ref, grant())):
        with pytest.raises(CredentialsEndpointError) as caught:
            await call
        message = str(caught.value)
        assert isinstance(caught.value, Retriable)
        assert f"answered {status}" in message
        assert TEMPLATE_PATH in message
        assert "tenant-with-a-name" not in message
        assert "leaked" not in message and "refresh-1" not in message


async def test_a_body_that_is_not_a_grant_is_an_error_naming_fields_only(
    endpoint: Endpoint, opened: list[HttpCredentials]
) -> None:
    store = await started(endpoint, opened)
    ref = GrantRef("crm", "t")
    endpoint.grants["/apps/crm/tenants/t/grant"] = {"serial": 1, "refresh_token": 42}
    with pytest.raises(CredentialsEndpointError, match="refresh_token is not text"):
        await store.load(ref)
    endpoint.answer = (200, "not json, secret-ish")
    with pytest.raises(CredentialsEndpointError, match="not JSON") as caught:
        await store.load(ref)
    assert "secret-ish" not in str(caught.value)


async def test_an_unreachable_endpoint_is_retriable_and_names_the_template_only(
    opened: list[HttpCredentials],
) -> None:
    store = HttpCredentials(
        "http://127.0.0.1:9/{partition.key}", MemoryCredentials(), shown_url="[redacted]"
    )
    await store.start()
    opened.append(store)
    with pytest.raises(CredentialsEndpointError) as caught:
        await store.load(GrantRef("crm", "tenant-x"))
    assert str(caught.value).startswith("credentials endpoint GET [redacted] failed: ")
    assert "127.0.0.1" not in str(caught.value) and "tenant-x" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_repr_shows_no_auth() -> None:
    store = HttpCredentials(
        "https://x/{partition.key}", MemoryCredentials(), bearer="b-token", headers={"K": "v-1"}
    )
    assert "b-token" not in repr(store) and "v-1" not in repr(store)
    assert json.dumps(repr(store))  # plain text


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("ftp://x/{partition.key}", "must be an http:// or https:// URL"),
        ("https://x/{partition.data.id}", "not {partition.data.id}"),
        ("https://x/{connector}", "must name {partition.key}"),
    ],
)
def test_a_bad_url_template_is_a_config_error(url: str, detail: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_url(url, "credentials.store.http.url")
    assert caught.value.path == "credentials.store.http.url"
    assert detail in str(caught.value)
