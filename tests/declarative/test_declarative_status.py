"""``on_status``: the default meaning of each status, and each configured action."""

from __future__ import annotations

from typing import Any

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, spec
from watukuy import Partition
from watukuy.declarative.errors import StatusFailed
from watukuy.http import NotModified, Throttled, VendorError, VendorUnavailable, reply
from watukuy.http.scripted import Unreachable

URL = "https://api.test/{partition.data.slug}/items"
ACME = Partition("acme", {"slug": "acme-corp"})
RENDERED = f"{API}/acme-corp/items"
LINE = "GET https://api.test/{partition.data.slug}/items"


def driver_for(on_status: dict[Any, str] | None = None, **overrides: Any) -> Driver:
    entry = spec(
        partitions={"static": [{"key": "acme", "data": {"slug": "x"}}]},
        request={"url": URL + "?key=literal-secret"},
        cursor={"token": {"path": "resume", "param": "cursor"}},
        on_status=on_status,
        schedule={"min": "45s"},
        **overrides,
    )
    return Driver(compile_spec(entry), partition=ACME)


def answer(driver: Driver, *responses: Any) -> None:
    driver.transport.add("GET", RENDERED, *responses)


def assert_no_tenant_data(exc: BaseException) -> None:
    text = str(exc)
    assert "acme-corp" not in text and "literal-secret" not in text


# -- defaults -------------------------------------------------------------------------------


async def test_2xx_is_a_page() -> None:
    driver = driver_for()
    answer(driver, reply(203, json={"data": [{"id": "a"}], "resume": "r1"}))
    assert [i["id"] for i in await driver.poll()] == ["a"]
    assert driver.cursor == "r1"


@pytest.mark.parametrize("status", [400, 401, 404, 410, 302])
async def test_other_statuses_fail_naming_method_template_and_status(status: int) -> None:
    driver = driver_for()
    answer(driver, reply(status))
    with pytest.raises(StatusFailed) as caught:
        await driver.page()
    assert str(caught.value).startswith(f"{LINE} -> {status}")
    assert_no_tenant_data(caught.value)


async def test_5xx_is_retried() -> None:
    driver = driver_for()
    answer(driver, reply(502))
    with pytest.raises(VendorError) as caught:
        await driver.page()
    assert str(caught.value) == f"{LINE} -> 502"


async def test_timeouts_and_refusals_are_retried() -> None:
    driver = driver_for()
    answer(driver, Unreachable())
    with pytest.raises(VendorUnavailable) as caught:
        await driver.page()
    assert_no_tenant_data(caught.value)


async def test_429_is_rate_limited_until_retry_after() -> None:
    driver = driver_for()
    answer(driver, reply(429, headers={"Retry-After": "120"}))
    with pytest.raises(Throttled) as caught:
        await driver.page()
    assert caught.value.until == driver.clock.now() + 120


async def test_304_is_no_change() -> None:
    driver = driver_for()
    answer(driver, reply(304))
    with pytest.raises(NotModified):
        await driver.page()


# -- configured -----------------------------------------------------------------------------


async def test_ignore_is_an_empty_last_page_and_the_cursor_stays() -> None:
    driver = driver_for({404: "ignore"})
    driver.cursor = "r7"
    answer(driver, reply(404, json={"error": "no such tenant"}))
    result = await driver.page()
    assert (result.items, result.cursor, result.has_more) == ([], "r7", False)


async def test_ignore_a_5xx_the_client_would_raise() -> None:
    driver = driver_for({"5xx": "ignore"})
    answer(driver, reply(500), reply(503, headers={"Retry-After": "5"}))
    assert (await driver.page()).items == []
    assert (await driver.page()).items == []


async def test_retry_a_4xx() -> None:
    driver = driver_for({409: "retry"})
    answer(driver, reply(409))
    with pytest.raises(VendorError) as caught:
        await driver.page()
    assert str(caught.value) == f"{LINE} -> 409"


async def test_rate_limited_without_headers_waits_schedule_min() -> None:
    driver = driver_for({403: "rate-limited"})
    answer(driver, reply(403))
    with pytest.raises(Throttled) as caught:
        await driver.page()
    assert caught.value.until == driver.clock.now() + 45
    assert str(caught.value).startswith(f"{LINE} -> 403, throttled until")


async def test_rate_limited_reads_the_ratelimit_reset() -> None:
    driver = driver_for({"4xx": "rate-limited"})
    answer(driver, reply(420, headers={"RateLimit-Remaining": "0", "RateLimit-Reset": "30"}))
    with pytest.raises(Throttled) as caught:
        await driver.page()
    assert caught.value.until == driver.clock.now() + 30


async def test_fail_a_429() -> None:
    driver = driver_for({429: "fail"})
    answer(driver, reply(429, headers={"Retry-After": "5"}))
    with pytest.raises(StatusFailed, match="-> 429"):
        await driver.page()


async def test_ok_reads_the_body_of_an_error_status() -> None:
    driver = driver_for({404: "ok"})
    answer(driver, reply(404, json={"data": [], "resume": "r2"}))
    result = await driver.page()
    assert (result.items, result.cursor) == ([], "r2")


async def test_a_code_wins_over_its_class() -> None:
    driver = driver_for({"4xx": "ignore", 404: "fail", "401": "retry"})
    answer(driver, reply(400), reply(404), reply(401))
    assert (await driver.page()).items == []
    with pytest.raises(StatusFailed):
        await driver.page()
    with pytest.raises(VendorError):
        await driver.page()
