"""``ctx.http`` against a tiny local vendor: validators, pacing headers, faults, secrets.

The vendor here is a handful of aiohttp routes written for these tests alone, so each test
shows the exact exchange it pins. The clock is fake (a fixed epoch), so throttle times are
exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from watukuy.core.errors import ConfigError, Retriable, WatukuyError
from watukuy.core.ratelimit import DEFAULT_RETRY_AFTER
from watukuy.core.state import Validators
from watukuy.http import (
    HttpClient,
    InvalidResponse,
    KeyHttp,
    NotModified,
    Throttled,
    VendorError,
    VendorUnavailable,
    redact_url,
    validator_key,
)
from watukuy.http.client import TargetCache, build_url
from watukuy.http.http11 import Http11Transport
from watukuy.http.scripted import ScriptedTransport
from watukuy.http.transport import AiohttpTransport, TransportError

pytestmark = pytest.mark.unit

NOW = 1_700_000_000.0
ETAG = '"v1"'
LAST_MODIFIED = "Wed, 21 Oct 2015 07:28:00 GMT"
SECRET = "s3cret-token"


def clock() -> float:
    return NOW


class Vendor:
    """A local vendor that records what it was sent; ``base`` is set once it listens."""

    def __init__(self) -> None:
        self.base = ""
        self.seen: list[web.Request] = []
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/echo", self.echo)
        app.router.add_get("/etag", self.etag)
        app.router.add_get("/lastmod", self.lastmod)
        app.router.add_get("/retry-after/{status}", self.retry_after)
        app.router.add_get("/status/{status}", self.status)
        app.router.add_get("/garbage", self.garbage)
        app.router.add_get("/quota", self.quota)
        app.router.add_get("/slow", self.slow)
        app.router.add_get("/headers", self.headers)
        app.router.add_get("/cookie", self.cookie)
        return app

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    async def echo(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        body = await request.text()
        return web.json_response(
            {
                "method": request.method,
                "query": [[key, value] for key, value in request.query.items()],
                "headers": dict(request.headers),
                "body": body,
            },
            headers={"ETag": ETAG},
        )

    async def cookie(self, request: web.Request) -> web.Response:
        """Sets a session cookie for whoever calls, and says which cookie came with the call."""
        self.seen.append(request)
        response = web.json_response({"cookie": request.headers.get("Cookie")})
        response.set_cookie("session", f"tenant-{request.query.get('tenant')}")
        return response

    async def etag(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        if request.headers.get("If-None-Match") == ETAG:
            return web.Response(status=304, headers={"ETag": ETAG})
        return web.json_response({"items": [1]}, headers={"ETag": ETAG})

    async def lastmod(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        if request.headers.get("If-Modified-Since") == LAST_MODIFIED:
            return web.Response(status=304)
        return web.json_response({"items": [1]}, headers={"Last-Modified": LAST_MODIFIED})

    async def retry_after(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        return web.Response(status=int(request.match_info["status"]), headers={"Retry-After": "7"})

    async def status(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        return web.Response(status=int(request.match_info["status"]), text="nope")

    async def garbage(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        return web.Response(text='{"items": [1, ', content_type="application/json")

    async def quota(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        headers = {
            "RateLimit-Limit": "100",
            "RateLimit-Remaining": request.query.get("remaining", "0"),
            "RateLimit-Reset": request.query.get("reset", "30"),
        }
        return web.json_response({"items": []}, headers=headers)

    async def headers(self, request: web.Request) -> web.Response:
        """Answers with the headers given as ``?h=Name:value`` (repeatable, in order)."""
        self.seen.append(request)
        sent: list[tuple[str, str]] = []
        for pair in request.query.getall("h", []):
            name, _, value = pair.partition(":")
            sent.append((name, value))
        response = web.json_response({"items": []})
        for name, value in sent:
            response.headers.add(name, value)
        return response

    async def slow(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        # Held until the test ends (or 5 s), far past any client timeout used here.
        self.arrived.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.release.wait(), timeout=5)
        return web.json_response({})


@pytest.fixture
async def vendor() -> AsyncIterator[Vendor]:
    vendor = Vendor()
    server = TestServer(vendor.app(), host="127.0.0.1", port=0)
    await server.start_server()
    vendor.base = f"http://127.0.0.1:{server.port}"
    yield vendor
    vendor.release.set()
    await server.close()


TRANSPORTS: dict[str, type[Http11Transport] | type[AiohttpTransport]] = {
    "http11": Http11Transport,
    "aiohttp": AiohttpTransport,
}


@pytest.fixture(params=sorted(TRANSPORTS))
def make_client(request: pytest.FixtureRequest) -> Callable[..., HttpClient]:
    """An ``HttpClient`` over each production transport, made as the engine makes it."""

    def make(*, timeout: float = 30.0, user_agent: str = "watukuy/0.1") -> HttpClient:
        transport = TRANSPORTS[request.param](user_agent=user_agent, timeout=timeout)
        return HttpClient(timeout=timeout, user_agent=user_agent, transport=transport)

    return make


@pytest.fixture
async def client(make_client: Callable[..., HttpClient]) -> AsyncIterator[HttpClient]:
    client = make_client(timeout=5.0)
    await client.start()
    yield client
    await client.close()


def key_http(
    client: HttpClient,
    validators: dict[str, Validators] | None = None,
    timeout: float | None = None,
) -> KeyHttp:
    return client.for_key(validators=validators or {}, acquire=None, now=clock, timeout=timeout)


def closed_port() -> int:
    """A local port nothing listens on (bound then released), so connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def assert_no_secret(exc: BaseException) -> None:
    for text in (str(exc), repr(exc), repr(exc.args), str(getattr(exc, "url", ""))):
        assert SECRET not in text
        assert "Bearer" not in text
        assert "?" not in text
    # The host and path may be the tenant's: without a template the text has neither.
    for text in (str(exc), repr(exc), repr(exc.args)):
        assert "127.0.0.1" not in text
        assert "/status/" not in text and "/garbage" not in text and "/slow" not in text


# --- validators -------------------------------------------------------------------------


async def test_etag_round_trip(vendor: Vendor, client: HttpClient) -> None:
    first = key_http(client)
    response = await first.get(vendor.url("/etag"), query={"page": 1})

    assert response.status == 200
    assert await response.json() == {"items": [1]}
    full_url = vendor.url("/etag?page=1")
    assert first.validators_changed == {
        validator_key(full_url): Validators(etag=ETAG, last_modified=None)
    }
    assert full_url not in repr(first.validators_changed)  # URLs carry partition data
    assert "If-None-Match" not in vendor.seen[0].headers

    second = key_http(client, validators=first.validators_changed)
    with pytest.raises(NotModified) as caught:
        await second.get(vendor.url("/etag"), query={"page": 1})

    assert vendor.seen[1].headers["If-None-Match"] == ETAG
    assert caught.value.url == vendor.url("/etag")
    assert second.validators_changed == {}


async def test_validators_are_per_full_url(vendor: Vendor, client: HttpClient) -> None:
    stored = {validator_key(vendor.url("/etag?page=1")): Validators(etag=ETAG)}
    key = key_http(client, validators=stored)

    response = await key.get(vendor.url("/etag"), query={"page": 2})

    assert response.status == 200
    assert "If-None-Match" not in vendor.seen[0].headers
    assert key.validators_changed == {
        validator_key(vendor.url("/etag?page=2")): Validators(etag=ETAG, last_modified=None)
    }


async def test_last_modified_round_trip(vendor: Vendor, client: HttpClient) -> None:
    first = key_http(client)
    await first.get(vendor.url("/lastmod"))

    full_url = vendor.url("/lastmod")
    assert first.validators_changed == {
        validator_key(full_url): Validators(etag=None, last_modified=LAST_MODIFIED)
    }

    second = key_http(client, validators=first.validators_changed)
    with pytest.raises(NotModified):
        await second.get(full_url)
    assert vendor.seen[1].headers["If-Modified-Since"] == LAST_MODIFIED


async def test_caller_validator_header_wins(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client, validators={validator_key(vendor.url("/etag")): Validators(etag=ETAG)})

    response = await key.get(vendor.url("/etag"), headers={"if-none-match": '"other"'})

    assert response.status == 200
    assert vendor.seen[0].headers.getall("If-None-Match") == ['"other"']


async def test_non_get_is_not_conditional(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client, validators={validator_key(vendor.url("/echo")): Validators(etag=ETAG)})

    response = await key.request("post", vendor.url("/echo"), json={"a": 1})

    body = await response.json()
    assert body["method"] == "POST"
    assert body["body"] == '{"a": 1}'
    assert "If-None-Match" not in vendor.seen[0].headers
    assert key.validators_changed == {}


# --- pacing -----------------------------------------------------------------------------


async def test_429_with_retry_after(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client)

    with pytest.raises(Throttled) as caught:
        await key.get(vendor.url("/retry-after/429"))

    assert caught.value.until == pytest.approx(NOW + 7)
    assert caught.value.status == 429
    assert isinstance(caught.value, Retriable)
    assert key.throttle_until == pytest.approx(NOW + 7)


async def test_429_without_retry_after_uses_default(vendor: Vendor, client: HttpClient) -> None:
    with pytest.raises(Throttled) as caught:
        await key_http(client).get(vendor.url("/status/429"))

    assert caught.value.until == pytest.approx(NOW + DEFAULT_RETRY_AFTER)


async def test_503_with_retry_after_is_throttled(vendor: Vendor, client: HttpClient) -> None:
    with pytest.raises(Throttled) as caught:
        await key_http(client).get(vendor.url("/retry-after/503"))

    assert caught.value.status == 503
    assert caught.value.until == pytest.approx(NOW + 7)


async def test_503_without_retry_after_is_an_outage(vendor: Vendor, client: HttpClient) -> None:
    with pytest.raises(VendorError) as caught:
        await key_http(client).get(vendor.url("/status/503"))

    assert not isinstance(caught.value, Throttled)
    assert caught.value.status == 503


async def test_exhausted_quota_paces_but_returns(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client)

    response = await key.get(vendor.url("/quota"))

    assert response.status == 200
    assert key.throttle_until == pytest.approx(NOW + 30)


async def test_throttle_until_keeps_the_latest(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client)

    await key.get(vendor.url("/quota"), query={"reset": 10})
    await key.get(vendor.url("/quota"), query={"reset": 40})
    await key.get(vendor.url("/quota"), query={"reset": 20})
    await key.get(vendor.url("/quota"), query={"reset": 90, "remaining": 5})

    assert key.throttle_until == pytest.approx(NOW + 40)


async def test_acquire_awaited_once_before_each_request(vendor: Vendor, client: HttpClient) -> None:
    served_at_acquire: list[int] = []

    async def acquire() -> None:
        served_at_acquire.append(len(vendor.seen))

    key = client.for_key(validators={}, acquire=acquire, now=clock)
    await key.get(vendor.url("/echo"))
    await key.get(vendor.url("/status/404"))
    with pytest.raises(VendorError):
        await key.get(vendor.url("/status/500"))

    assert served_at_acquire == [0, 1, 2]
    assert key.requests == 3


# --- errors and secrets -----------------------------------------------------------------


async def test_500_is_vendor_error_without_secrets(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client)

    with pytest.raises(VendorError) as caught:
        await key.get(
            vendor.url("/status/500"),
            query={"api_key": SECRET},
            headers={"Authorization": f"Bearer {SECRET}"},
        )

    assert str(caught.value) == "GET <url withheld> -> 500"
    assert caught.value.status == 500
    assert caught.value.url == vendor.url("/status/500")  # in-process only, for a debugger
    assert_no_secret(caught.value)


async def test_404_is_returned_and_raise_for_status_raises(
    vendor: Vendor, client: HttpClient
) -> None:
    response = await key_http(client).get(vendor.url("/status/404"), query={"token": SECRET})

    assert response.status == 404
    assert await response.text() == "nope"
    assert SECRET not in repr(response)
    with pytest.raises(VendorError) as caught:
        response.raise_for_status()
    assert caught.value.status == 404
    assert_no_secret(caught.value)


async def test_connection_refused_is_unavailable(client: HttpClient) -> None:
    url = f"http://127.0.0.1:{closed_port()}/items"

    with pytest.raises(VendorUnavailable) as caught:
        await key_http(client).get(url, query={"token": SECRET})

    # The transport translated the socket's (or aiohttp's) error at its edge, kept as the cause.
    assert isinstance(caught.value.__cause__, TransportError)
    cause = caught.value.__cause__.__cause__
    assert isinstance(cause, aiohttp.ClientConnectionError | ConnectionRefusedError)
    assert "connection failed" in str(caught.value)
    assert isinstance(caught.value, Retriable)
    assert_no_secret(caught.value)


async def test_timeout_is_unavailable(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client, timeout=0.2)

    with pytest.raises(VendorUnavailable) as caught:
        await key.get(vendor.url("/slow"), query={"token": SECRET})

    assert isinstance(caught.value.__cause__, TimeoutError)
    assert "timed out" in str(caught.value)
    assert_no_secret(caught.value)


async def test_a_request_the_fetchs_deadline_ends_first_has_no_timer_of_its_own() -> None:
    transport = ScriptedTransport()
    transport.add("GET", "https://api.test/items", json={"data": []})
    client = HttpClient(timeout=5.0, transport=transport)
    key = key_http(client, timeout=5.0)
    loop = asyncio.get_running_loop()

    await key.get("https://api.test/items")  # no deadline: its own timeout
    key.deadline = loop.time() + 60.0  # ends later than the request would time out
    await key.get("https://api.test/items")
    key.deadline = loop.time() + 4.0  # ends first: the request needs no timer
    await key.get("https://api.test/items")

    assert [request.timeout for request in transport.requests] == [5.0, 5.0, None]


async def test_cancellation_is_not_swallowed(vendor: Vendor, client: HttpClient) -> None:
    task = asyncio.create_task(key_http(client).get(vendor.url("/slow")))
    await vendor.arrived.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task


async def test_malformed_json_is_invalid_response(vendor: Vendor, client: HttpClient) -> None:
    response = await key_http(client).get(vendor.url("/garbage"), query={"token": SECRET})

    assert response.status == 200
    with pytest.raises(InvalidResponse) as caught:
        await response.json()

    assert isinstance(caught.value, WatukuyError)
    assert str(caught.value).startswith("GET <url withheld>: malformed JSON (")
    assert_no_secret(caught.value)
    assert await response.text() == '{"items": [1, '


TEMPLATE = "http://{partition.data.host}/{partition.data.slug}/items"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/status/500", f"GET {TEMPLATE} -> 500"),
        ("/status/503", f"GET {TEMPLATE} -> 503"),
        ("/retry-after/429", f"GET {TEMPLATE} -> 429, throttled until {NOW + 7:.3f}"),
        ("/etag", f"GET {TEMPLATE} -> 304"),
    ],
)
async def test_errors_name_the_template_never_the_rendered_url(
    vendor: Vendor, client: HttpClient, path: str, expected: str
) -> None:
    sent = build_url(vendor.url(path), {"token": SECRET})
    key = key_http(client, validators={validator_key(str(sent)): Validators(etag=ETAG)})

    with pytest.raises(WatukuyError) as caught:
        await key.get(vendor.url(path), query={"token": SECRET}, template=TEMPLATE)

    assert str(caught.value) == expected
    assert caught.value.template == TEMPLATE  # type: ignore[attr-defined]
    assert_no_secret(caught.value)


async def test_body_and_status_errors_of_a_response_name_its_template(
    vendor: Vendor, client: HttpClient
) -> None:
    key = key_http(client)
    garbage = await key.request("GET", vendor.url("/garbage"), template=TEMPLATE)
    missing = await key.request("GET", vendor.url("/status/404"), template=TEMPLATE)

    with pytest.raises(InvalidResponse) as bad_json:
        await garbage.json()
    with pytest.raises(VendorError) as not_found:
        missing.raise_for_status()

    assert str(bad_json.value).startswith(f"GET {TEMPLATE}: malformed JSON (")
    assert str(not_found.value) == f"GET {TEMPLATE} -> 404"
    assert repr(missing) == f"<Response 404 GET {TEMPLATE}>"
    assert repr(await key.get(vendor.url("/status/404"))) == "<Response 404 GET <url withheld>>"


async def test_a_timeout_names_the_template(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client, timeout=0.2)

    with pytest.raises(VendorUnavailable) as caught:
        await key.get(vendor.url("/slow"), query={"token": SECRET}, template=TEMPLATE)

    assert str(caught.value) == f"GET {TEMPLATE}: timed out after 0.2s (TimeoutError)"
    assert_no_secret(caught.value)


@pytest.mark.parametrize(
    "template",
    [
        f"https://api.example.com/{{partition.data.slug}}/items?api_key={SECRET}",
        f"https://api.example.com/{{partition.data.slug}}/items#{SECRET}",
        f"https://me:{SECRET}@api.example.com/{{partition.data.slug}}/items",
    ],
    ids=["query", "fragment", "userinfo"],
)
def test_a_literal_secret_written_into_a_template_is_not_shown(template: str) -> None:
    error = VendorError(status=500, template=template)

    assert str(error) == "GET https://api.example.com/{partition.data.slug}/items -> 500"
    assert SECRET not in repr(error)


# --- request shape ----------------------------------------------------------------------


async def test_query_drops_none_and_stringifies(vendor: Vendor, client: HttpClient) -> None:
    query: dict[str, Any] = {"cursor": None, "limit": 50, "deleted": True, "q": "a b"}

    response = await key_http(client).get(vendor.url("/echo?fixed=1"), query=query)

    body = await response.json()
    assert body["query"] == [["fixed", "1"], ["limit", "50"], ["deleted", "True"], ["q", "a b"]]
    assert response.url == vendor.url("/echo?fixed=1&limit=50&deleted=True&q=a+b")


async def test_headers_and_user_agent(
    vendor: Vendor, make_client: Callable[..., HttpClient]
) -> None:
    async with make_client(user_agent="watukuy-test/1") as client:
        response = await key_http(client).get(vendor.url("/echo"), headers={"X-Tenant": "t_42"})

        sent = (await response.json())["headers"]
        assert sent["User-Agent"] == "watukuy-test/1"
        assert sent["X-Tenant"] == "t_42"
        assert response.headers["etag"] == ETAG  # case-insensitive


async def test_session_opens_lazily_and_refuses_after_close(
    vendor: Vendor, make_client: Callable[..., HttpClient]
) -> None:
    client = make_client()
    key = key_http(client)

    assert (await key.get(vendor.url("/echo"))).status == 200

    await client.close()
    with pytest.raises(RuntimeError):
        await key.get(vendor.url("/echo"))
    await client.close()  # idempotent


async def test_relative_url_is_a_config_error(client: HttpClient) -> None:
    with pytest.raises(ConfigError) as caught:
        await key_http(client).get(f"/items?token={SECRET}")

    assert SECRET not in str(caught.value)


# --- pacing: the quick "quota left" check must never hide a spent quota -------------------


@pytest.mark.parametrize("remaining", ["0", "0.5", " 0 ", "-0", "00", '"0"'])
async def test_a_spent_quota_paces_however_zero_is_spelled(
    vendor: Vendor, client: HttpClient, remaining: str
) -> None:
    key = key_http(client)

    await key.get(vendor.url("/quota"), query={"remaining": remaining, "reset": 30})

    assert key.throttle_until == pytest.approx(NOW + 30)


@pytest.mark.parametrize("remaining", ["1", "7", "0012", "250"])
async def test_quota_left_does_not_pace(vendor: Vendor, client: HttpClient, remaining: str) -> None:
    key = key_http(client)

    await key.get(vendor.url("/quota"), query={"remaining": remaining, "reset": 30})

    assert key.throttle_until is None


@pytest.mark.parametrize(
    "headers",
    [
        # the combined field wins over the split ones, whatever they say
        ["RateLimit:limit=10, remaining=0, reset=30", "RateLimit-Remaining:5"],
        ['RateLimit:"default";r=0;t=30'],
        # X- variant alone
        ["X-RateLimit-Limit:10", "X-RateLimit-Remaining:0", "X-RateLimit-Reset:30"],
        # the split IETF family is read before X-, even when X- says there is quota left
        ["RateLimit-Remaining:0", "RateLimit-Reset:30", "X-RateLimit-Remaining:9"],
        # a repeated field: the full parse reads the last value
        ["RateLimit-Remaining:5", "RateLimit-Remaining:0", "RateLimit-Reset:30"],
    ],
    ids=["combined", "combined-params", "x-ratelimit", "ietf-before-x", "repeated"],
)
async def test_every_rate_limit_family_that_says_spent_paces(
    vendor: Vendor, client: HttpClient, headers: list[str]
) -> None:
    key = key_http(client)

    await key.get(vendor.url("/headers?" + urlencode([("h", h) for h in headers])))

    assert key.throttle_until == pytest.approx(NOW + 30)


async def test_no_rate_limit_headers_no_pacing(vendor: Vendor, client: HttpClient) -> None:
    key = key_http(client)

    await key.get(vendor.url("/headers"), query={"h": "X-Other:0"})

    assert key.throttle_until is None


# --- parsed URLs are remembered -----------------------------------------------------------


async def test_a_repeated_request_reuses_its_parsed_url(vendor: Vendor, client: HttpClient) -> None:
    stored = {validator_key(vendor.url("/etag?page=1")): Validators(etag=ETAG)}

    for _ in range(3):
        with pytest.raises(NotModified) as caught:
            await key_http(client, validators=stored).get(
                vendor.url("/etag"), query={"page": 1, "cursor": None}
            )
        assert caught.value.url == vendor.url("/etag")

    assert [r.headers.get("If-None-Match") for r in vendor.seen] == [ETAG] * 3
    assert [r.path_qs for r in vendor.seen] == ["/etag?page=1"] * 3
    assert (client.targets.misses, client.targets.hits) == (1, 2)


def test_target_is_what_build_url_gives_in_every_form() -> None:
    cache = TargetCache()
    url = f"https://user:{SECRET}@vendor.example/v1/items?fixed=1#frag"

    target = cache.get(url, {"token": SECRET, "cursor": None, "limit": 50})

    built = build_url(url, {"token": SECRET, "limit": 50})
    assert target.url == built
    assert target.full == str(built)
    assert target.key == validator_key(str(built))
    assert target.redacted == redact_url(built) == "https://vendor.example/v1/items"
    assert SECRET not in target.redacted


def test_target_cache_keys_by_the_query_as_sent() -> None:
    cache = TargetCache()
    url = "http://vendor.example/items"

    first = cache.get(url, {"limit": 50})

    assert cache.get(url, {"limit": "50"}) is first  # the same URL on the wire
    assert cache.get(url, {"limit": 50, "cursor": None}) is first
    assert cache.get(url, {"limit": True}).full == "http://vendor.example/items?limit=True"
    assert cache.get(url, {"limit": 1}).full == "http://vendor.example/items?limit=1"
    assert cache.get(url, {"limit": 1.0}).full == "http://vendor.example/items?limit=1.0"
    assert cache.get(url, None).full == url
    assert cache.get(url, {"a": 1, "b": 2}).full != cache.get(url, {"b": 2, "a": 1}).full


def test_target_cache_is_bounded_least_recently_used_first() -> None:
    cache = TargetCache(size=2)
    a = cache.get("http://vendor.example/a", None)
    cache.get("http://vendor.example/b", None)
    assert cache.get("http://vendor.example/a", None) is a  # a is now the most recent

    cache.get("http://vendor.example/c", None)  # evicts b

    assert len(cache) == 2
    assert cache.get("http://vendor.example/a", None) is a
    misses = cache.misses
    cache.get("http://vendor.example/b", None)
    assert cache.misses == misses + 1


def test_target_cache_of_size_zero_remembers_nothing() -> None:
    cache = TargetCache(size=0)

    first = cache.get("http://vendor.example/a", None)

    assert cache.get("http://vendor.example/a", None) is not first
    assert len(cache) == 0


def test_invalid_urls_raise_every_time_and_are_not_remembered() -> None:
    cache = TargetCache()

    for _ in range(2):
        with pytest.raises(ConfigError) as caught:
            cache.get(f"/relative?token={SECRET}", None)
        assert SECRET not in str(caught.value)
    with pytest.raises(ConfigError):
        cache.get(["not", "a", "url"], None)  # type: ignore[arg-type]
    assert len(cache) == 0


@pytest.mark.parametrize("size", [-1, 1.5, True, "10"])
def test_url_cache_size_is_validated(size: Any) -> None:
    with pytest.raises(ConfigError):
        HttpClient(url_cache=size)


def test_client_timeouts_are_made_once_per_value() -> None:
    transport = AiohttpTransport()

    assert transport.client_timeout(5.0) is transport.client_timeout(5.0)
    assert transport.client_timeout(5.0).total == 5.0
    assert transport.client_timeout(7.0).total == 7.0


def test_redacting_twice_gives_the_same_text() -> None:
    url = f"https://user:{SECRET}@vendor.example:8443/a b/items?token={SECRET}#x"

    once = redact_url(url)

    assert once == "https://vendor.example:8443/a%20b/items"
    assert redact_url(once) == once
    assert redact_url(str(once)) == once
    assert str(NotModified(once)) == "GET <url withheld> -> 304"
    assert NotModified(once).url == once


async def test_a_cookie_set_for_one_tenant_never_reaches_another(
    vendor: Vendor, client: HttpClient
) -> None:
    # By host name: aiohttp's default jar would keep cookies of a named host, not of an IP.
    url = vendor.url("/cookie").replace("127.0.0.1", "localhost")
    first = await key_http(client).get(url, query={"tenant": "a"})
    assert (await first.json())["cookie"] is None
    second = await key_http(client).get(url, query={"tenant": "b"})
    assert (await second.json())["cookie"] is None
