"""Every failure is ``{"error_code", "message"}`` JSON, never an HTML page or a traceback."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.rest.fake_control import FakeControl
from tests.rest.support import config, error_of, rest_client, seed
from watukuy.core.errors import Retriable
from watukuy.rest.port import Health, Metrics
from watukuy.rest.routes import METRICS_CHUNK, megabytes

CANARY = "tenant-secret-canary-5521"


async def test_unknown_route_is_json_404() -> None:
    async with rest_client() as client:
        for path in ("/nope", "/connectors/tickets/nope", "/connectors/a/b/c/d/e/f"):
            message = await error_of(await client.get(path), 404)
            assert message == "unknown route; GET /openapi.json lists the routes"


async def test_wrong_method_is_json_405_with_allow() -> None:
    async with rest_client() as client:
        response = await client.post("/connectors/tickets/status")
        message = await error_of(response, 405)
    assert message == "method POST is not allowed here; allowed: GET"
    assert response.headers["Allow"] == "GET"


async def test_body_over_the_limit_is_413() -> None:
    fake = seed(FakeControl())
    before = fake.snapshot()
    async with rest_client(fake, body_limit=1024) as client:
        big = {"name": "orders", "config": config(records="x" * 2000)}
        response = await client.post("/connectors", json=big)
        assert await error_of(response, 413) == "the body is over the limit of 1024 bytes"
    assert fake.snapshot() == before


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("application/json; charset=utf-8", 201),
        ("application/merge-patch+json", 201),
    ],
)
async def test_body_routes_take_json_only(content_type: str, status: int) -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        response = await client.put(
            "/connectors/orders/config",
            data=b'{"request": {"url": "https://a.test/x"}, "records": "d", "identity": "id"}',
            headers={"Content-Type": content_type},
        )
        if status == 415:
            message = await error_of(response, 415)
            assert message == "the body must be JSON: send Content-Type: application/json"
            assert "orders" not in fake.connectors_by_name
        else:
            assert response.status == status


@pytest.mark.parametrize("raw", [b"{", b'{"a": NaN}', b"\xff\xfe", b'{"a": 1}}'])
async def test_a_body_that_is_not_json_is_400(raw: bytes) -> None:
    async with rest_client() as client:
        response = await client.post(
            "/connectors", data=raw, headers={"Content-Type": "application/json"}
        )
        assert await error_of(response, 400) == "body: is not valid JSON (UTF-8)"


async def test_a_missing_body_is_400() -> None:
    async with rest_client() as client:
        assert await error_of(await client.post("/connectors"), 400) == (
            "body: is required: a JSON object"
        )


async def test_a_broken_seam_is_a_bare_500(caplog: pytest.LogCaptureFixture) -> None:
    fake = seed(FakeControl())
    fake.fail_with = RuntimeError(f"token={CANARY} at https://{CANARY}.vendor.test/items")
    with caplog.at_level(logging.DEBUG):
        async with rest_client(fake) as client:
            response = await client.get("/connectors/tickets/status")
            text = await response.text()
            message = await error_of(response, 500)
    assert message == "internal error; the runner's log has the error type"
    assert CANARY not in text and "Traceback" not in text
    assert CANARY not in caplog.text
    assert "GET /connectors/{name}/status failed: RuntimeError" in caplog.text


async def test_kafka_out_of_reach_is_503() -> None:
    fake = seed(FakeControl())
    fake.fail_with = Retriable(f"broker {CANARY} unreachable")
    async with rest_client(fake) as client:
        response = await client.get("/connectors")
        message = await error_of(response, 503)
    assert message == "temporarily unavailable: try again shortly"
    assert response.headers["Retry-After"] == "5"


@pytest.mark.parametrize(
    ("state", "status"), [("healthy", 200), ("starting", 503), ("unhealthy", 500)]
)
async def test_health_follows_kip_1017(state: str, status: int) -> None:
    fake = seed(FakeControl())
    fake.health_state = Health(state, f"the runner is {state}")  # type: ignore[arg-type]
    async with rest_client(fake) as client:
        response = await client.get("/health")
        assert response.status == status
        assert await response.json() == {"status": state, "message": f"the runner is {state}"}


class LargeScrape(FakeControl):
    """A scrape of many keys: several megabytes of text, in pieces as an observer writes them
    (a key's lines each), one of them larger than a part sent at a time."""

    pieces = [f'watukuy_lag_seconds{{partition="t-{i}"}} 1.5\n'.encode() for i in range(99_999)]
    pieces.insert(50_000, b"".join(pieces[:40_000]))
    body = b"".join(pieces)

    async def metrics(self) -> Metrics:
        return Metrics(self.pieces, "text/plain; version=0.0.4; charset=utf-8")


async def test_a_large_scrape_arrives_whole_with_its_length() -> None:
    """It is sent a part at a time (routes.metrics): the scraper reads it all, once."""
    assert len(LargeScrape.body) > 3 * METRICS_CHUNK
    assert len(LargeScrape.pieces[50_000]) > METRICS_CHUNK
    async with rest_client(seed(LargeScrape())) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Length"] == str(len(LargeScrape.body))
        assert "Transfer-Encoding" not in response.headers
        async with asyncio.timeout(10):  # short of its length, the body would never end
            assert await response.read() == LargeScrape.body


@pytest.mark.parametrize(
    "sizes", [[], [0], [1], [3, 3, 3], [10], [2, 11, 1], [4, 4, 25, 4], [0, 0, 5, 0, 40]]
)
def test_a_scrape_is_sent_in_its_order_in_parts_of_at_most_two_chunks(sizes: list[int]) -> None:
    pieces = [bytes([65 + n]) * size for n, size in enumerate(sizes)]
    parts = [bytes(part) for part in megabytes(pieces, size=8, count=2)]
    assert b"".join(parts) == b"".join(pieces)
    assert all(0 < len(part) <= 2 * 8 for part in parts)


def test_small_pieces_are_joined_so_many_at_a_time() -> None:
    assert list(megabytes([b"abc"] * 10, size=8, count=4)) == [b"abc" * 4] * 2 + [b"abc" * 2]


async def test_healthz_and_metrics() -> None:
    async with rest_client() as client:
        healthz = await (await client.get("/healthz")).json()
        assert healthz["runner"] == "runner-1"
        assert {(k["poller"], k["partition"]) for k in healthz["keys"]} >= {
            ("tenants", "acme"),
            ("tickets", ""),
        }
        metrics = await client.get("/metrics")
        assert metrics.status == 200
        assert metrics.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "watukuy_up 1" in await metrics.text()
