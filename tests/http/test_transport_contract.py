"""The :class:`~watukuy.http.transport.Transport` contract, run against every socket transport.

Each test sends a :class:`Request` straight to the transport and checks the
:class:`RawResponse` a client would build on: the exchanges a vendor's HTTP/1.1 server can
produce (compressed and chunked bodies, redirects, bodies read to the close, keep-alive) and
the errors that must come out as :class:`TransportError` without the URL in them.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from watukuy.http.http11 import Http11Transport
from watukuy.http.transport import AiohttpTransport, Request, Transport, TransportError

pytestmark = pytest.mark.unit

SECRET = "s3cret-token"
TRANSPORTS: dict[str, Callable[[], Any]] = {
    "http11": lambda: Http11Transport(user_agent="watukuy-test/2", timeout=5.0),
    "aiohttp": lambda: AiohttpTransport(user_agent="watukuy-test/2", timeout=5.0),
}


@pytest.fixture(params=sorted(TRANSPORTS))
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    made: Transport = TRANSPORTS[request.param]()
    yield made
    await made.close()


class Vendor:
    """aiohttp routes for the well-formed exchanges; ``hits`` counts requests per path."""

    def __init__(self) -> None:
        self.base = URL()
        self.hits: dict[str, int] = {}
        self.peers: set[object] = set()

    def app(self) -> web.Application:
        app = web.Application()
        for path, handler in {
            "/gzip": self.gzip,
            "/deflate": self.deflate,
            "/chunked": self.chunked,
            "/see-other": self.see_other,
            "/loop": self.loop,
            "/elsewhere": self.elsewhere,
            "/echo": self.echo,
            "/not-http": self.not_http,
        }.items():
            app.router.add_route("*", path, handler)
        return app

    def url(self, path: str) -> URL:
        return self.base.join(URL(path))

    def _hit(self, request: web.Request) -> None:
        self.hits[request.path] = self.hits.get(request.path, 0) + 1
        transport = request.transport
        if transport is not None:
            self.peers.add(transport.get_extra_info("peername"))

    async def gzip(self, request: web.Request) -> web.Response:
        self._hit(request)
        body = gzip.compress(b'{"items": [1, 2]}')
        return web.Response(body=body, headers={"Content-Encoding": "gzip"})

    async def deflate(self, request: web.Request) -> web.Response:
        self._hit(request)
        body = zlib.compress(b'{"items": [3]}')
        return web.Response(body=body, headers={"Content-Encoding": "deflate"})

    async def chunked(self, request: web.Request) -> web.StreamResponse:
        self._hit(request)
        response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=latin-1"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for part in (b"one,", b"two,", b"three"):
            await response.write(part)
        await response.write_eof()
        return response

    async def see_other(self, request: web.Request) -> web.Response:
        self._hit(request)
        raise web.HTTPSeeOther(location=f"/echo?from=see-other&token={SECRET}")

    async def loop(self, request: web.Request) -> web.Response:
        self._hit(request)
        raise web.HTTPFound(location=f"/loop?token={SECRET}")

    async def elsewhere(self, request: web.Request) -> web.Response:
        self._hit(request)
        other = str(self.base).replace("127.0.0.1", "localhost")
        raise web.HTTPTemporaryRedirect(location=f"{other}/echo")

    async def not_http(self, request: web.Request) -> web.Response:
        self._hit(request)
        raise web.HTTPFound(location="ftp://files.example/items")

    async def echo(self, request: web.Request) -> web.Response:
        self._hit(request)
        return web.json_response(
            {
                "method": request.method,
                "query": dict(request.query),
                "headers": dict(request.headers),
                "body": await request.text(),
            }
        )


@pytest.fixture
async def vendor() -> AsyncIterator[Vendor]:
    vendor = Vendor()
    server = TestServer(vendor.app(), host="127.0.0.1", port=0)
    await server.start_server()
    vendor.base = URL(f"http://127.0.0.1:{server.port}")
    yield vendor
    await server.close()


Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Answer], Awaitable[URL]]]:
    """A socket server answering each connection with the bytes a test writes by hand."""
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> URL:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return URL(f"http://127.0.0.1:{port}")

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


def written_then_closed(*parts: bytes) -> Answer:
    """An answer that reads the request, writes ``parts`` one write each, then closes."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for part in parts:
            writer.write(part)
            await writer.drain()
        writer.close()

    return answer


def get(url: URL, **headers: str) -> Request:
    return Request("GET", url, headers, timeout=5.0)


async def test_gzip_and_deflate_bodies_arrive_decoded(transport: Transport, vendor: Vendor) -> None:
    zipped = await transport.send(get(vendor.url("/gzip")))
    deflated = await transport.send(get(vendor.url("/deflate")))

    assert (zipped.status, zipped.body) == (200, b'{"items": [1, 2]}')
    assert deflated.body == b'{"items": [3]}'


async def test_a_chunked_body_arrives_whole_with_its_charset(
    transport: Transport, vendor: Vendor
) -> None:
    answer = await transport.send(get(vendor.url("/chunked")))

    assert answer.body == b"one,two,three"
    assert answer.charset == "latin-1"


async def test_defaults_are_sent_and_a_request_header_wins(
    transport: Transport, vendor: Vendor
) -> None:
    plain = await transport.send(get(vendor.url("/echo")))
    mine = await transport.send(get(vendor.url("/echo"), **{"User-Agent": "mine/1", "X-T": "a"}))

    plain_headers = _json(plain.body)["headers"]
    mine_headers = _json(mine.body)["headers"]
    assert plain_headers["User-Agent"] == "watukuy-test/2"
    assert "gzip" in plain_headers["Accept-Encoding"]
    assert plain_headers["Host"] == f"127.0.0.1:{vendor.base.port}"
    assert mine_headers["User-Agent"] == "mine/1"
    assert mine_headers["X-T"] == "a"


async def test_a_post_body_is_sent_with_its_length(transport: Transport, vendor: Vendor) -> None:
    request = Request("POST", vendor.url("/echo"), {"Content-Type": "text/plain"}, b"hello")

    answer = _json((await transport.send(request)).body)

    assert (answer["method"], answer["body"]) == ("POST", "hello")
    assert answer["headers"]["Content-Length"] == "5"


async def test_a_303_is_followed_as_a_get_and_says_where_it_ended(
    transport: Transport, vendor: Vendor
) -> None:
    request = Request("POST", vendor.url("/see-other"), {}, b"form")

    answer = await transport.send(request)

    echoed = _json(answer.body)
    assert (answer.status, echoed["method"], echoed["body"]) == (200, "GET", "")
    assert echoed["query"]["from"] == "see-other"
    assert URL(answer.url).path == "/echo"


async def test_authorization_is_dropped_on_a_redirect_to_another_host(
    transport: Transport, vendor: Vendor
) -> None:
    request = get(vendor.url("/elsewhere"), Authorization=f"Bearer {SECRET}")

    echoed = _json((await transport.send(request)).body)

    assert "Authorization" not in echoed["headers"]


async def test_a_redirect_loop_fails_without_the_url(transport: Transport, vendor: Vendor) -> None:
    with pytest.raises(TransportError) as caught:
        await transport.send(get(vendor.url(f"/loop?token={SECRET}")))

    assert SECRET not in str(caught.value) and "127.0.0.1" not in str(caught.value)
    assert 10 <= vendor.hits["/loop"] <= 11


async def test_a_redirect_to_a_url_that_is_not_http_fails(
    transport: Transport, vendor: Vendor
) -> None:
    with pytest.raises(TransportError) as caught:
        await transport.send(get(vendor.url("/not-http")))

    assert "files.example" not in str(caught.value)


async def test_connections_are_kept_alive_between_requests(
    transport: Transport, vendor: Vendor
) -> None:
    for _ in range(5):
        assert (await transport.send(get(vendor.url("/echo")))).status == 200

    assert len(vendor.peers) == 1


async def test_a_body_read_to_the_close_arrives_whole(
    transport: Transport, raw_server: Callable[[Answer], Awaitable[URL]]
) -> None:
    base = await raw_server(
        written_then_closed(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nno length, ", b"ends at the close"
        )
    )

    assert (await transport.send(get(base / "x"))).body == b"no length, ends at the close"


async def test_a_close_in_the_middle_of_a_body_is_a_transport_error(
    transport: Transport, raw_server: Callable[[Answer], Awaitable[URL]]
) -> None:
    base = await raw_server(
        written_then_closed(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
    )

    with pytest.raises(TransportError) as caught:
        await transport.send(get(base / "x"))
    assert "127.0.0.1" not in str(caught.value)


async def test_an_answer_that_is_not_http_is_a_transport_error(
    transport: Transport, raw_server: Callable[[Answer], Awaitable[URL]]
) -> None:
    base = await raw_server(written_then_closed(b"SSH-2.0-OpenSSH_9.2\r\n\r\n"))

    with pytest.raises(TransportError):
        await transport.send(get(base / "x"))


async def test_a_line_break_in_a_header_value_is_refused(
    transport: Transport, vendor: Vendor
) -> None:
    with pytest.raises((TransportError, ValueError)):
        await transport.send(get(vendor.url("/echo"), **{"X-T": "a\r\nX-Injected: 1"}))

    assert vendor.hits.get("/echo", 0) == 0


async def test_a_head_answer_ends_at_its_headers(
    transport: Transport, raw_server: Callable[[Answer], Awaitable[URL]]
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        # The length of the body a GET would get, and no body: a HEAD's answer.
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: "h"\r\n\r\n')
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    base = await raw_server(answer)

    answer_ = await transport.send(Request("HEAD", base / "x", {}, timeout=2.0))

    assert (answer_.status, answer_.body, answer_.headers["etag"]) == (200, b"", '"h"')


async def test_the_timeout_is_a_timeout_error(
    transport: Transport, raw_server: Callable[[Answer], Awaitable[URL]]
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)
        writer.close()

    base = await raw_server(answer)

    with pytest.raises(TimeoutError):
        await transport.send(Request("GET", base / "x", {}, timeout=0.2))


@pytest.mark.parametrize("kind", [Http11Transport, AiohttpTransport])
async def test_a_request_without_a_timeout_of_its_own_waits_for_its_answer(
    raw_server: Callable[[Answer], Awaitable[URL]], kind: type[Transport]
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(0.4)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    base = await raw_server(answer)
    # A default far shorter than the answer takes, which ``None`` must not fall back to.
    transport = kind(timeout=0.1)  # type: ignore[call-arg]
    try:
        answered = await transport.send(Request("GET", base / "x", {}, timeout=None))
    finally:
        await transport.close()

    assert (answered.status, answered.body) == (200, b"ok")


async def test_send_after_close_is_refused(transport: Transport, vendor: Vendor) -> None:
    await transport.send(get(vendor.url("/echo")))

    await transport.close()

    with pytest.raises(RuntimeError):
        await transport.send(get(vendor.url("/echo")))


# -- this transport's own promise, beyond aiohttp's ----------------------------------------


async def test_a_reused_connection_closed_before_its_answer_is_retried_once(
    raw_server: Callable[[Answer], Awaitable[URL]],
) -> None:
    """A keep-alive race: the server closed an idle connection as the request went out."""
    served = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        await read_request(reader)
        served += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        # Keep-alive was not refused, but the connection's next request is never answered.
        await reader.read(1)
        writer.close()

    base = await raw_server(answer)
    transport = Http11Transport(timeout=5.0)
    try:
        first = await transport.send(get(base / "a"))
        second = await transport.send(get(base / "b"))
        post = transport.send(Request("POST", base / "c", {}, b"x", timeout=5.0))
        with pytest.raises(TransportError):  # not idempotent: never sent twice
            await post
    finally:
        await transport.close()

    assert (first.body, second.body) == (b"ok", b"ok")
    assert served == 2


def _json(body: bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(body)
    return loaded
