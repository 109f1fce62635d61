"""Real APIs' paging (issue 43): next URLs in the body, tokens and page numbers inside a JSON
body, and a ``stop`` rule on any paginator; what the vendor receives on each page and what the
engine is given to store (a next URL never)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, query_of, spec
from watukuy import Partition
from watukuy.core.errors import ConfigError
from watukuy.declarative.errors import BadBody
from watukuy.http import reply

ITEMS = f"{API}/acme-corp/items"


def items(*ids: int) -> list[dict[str, Any]]:
    return [{"id": f"it-{i}"} for i in ids]


def body_of(driver: Driver, at: int) -> Any:
    request = driver.transport.requests[at]
    return None if request.body is None else json.loads(request.body)


def next_url_driver(**paginate: Any) -> Driver:
    return Driver(
        compile_spec(
            spec(
                request={"url": ITEMS, "query": {"limit": 2}},
                paginate={"next_url": {"path": "links.next"}, **paginate},
            )
        )
    )


async def test_next_url_follows_absolute_and_relative_urls_whose_query_replaces_the_requests() -> (
    None
):
    driver = next_url_driver()
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1, 2), "links": {"next": f"{ITEMS}?page=2&ids=a&ids=b"}}),
        reply(json={"data": items(3, 4), "links": {"next": "items?page=3"}}),  # relative
        reply(json={"data": items(5), "links": {"next": None}}),
    )
    found = await driver.poll()
    assert [i["id"] for i in found] == [f"it-{i}" for i in range(1, 6)]
    assert [str(r.url) for r in driver.transport.requests] == [
        f"{ITEMS}?limit=2",
        f"{ITEMS}?page=2&ids=a&ids=b",  # the request's limit is gone, repeated names kept
        f"{ITEMS}?page=3",
    ]


async def test_a_next_url_is_never_in_the_stored_cursor_and_a_restart_lists_again() -> None:
    driver = next_url_driver()
    driver.partition = Partition(key="acme")
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1, 2), "links": {"next": f"{ITEMS}?page=2"}}),
        reply(json={"data": items(1, 2), "links": {"next": f"{ITEMS}?page=2"}}),
        reply(json={"data": items(3), "links": {}}),
    )
    first = await driver.page()
    assert first.has_more
    assert "acme-corp" not in json.dumps(first.cursor) and "page=2" not in json.dumps(first.cursor)

    # Another runner (or a restart) takes the key over with the committed cursor alone.
    fresh = next_url_driver()
    fresh.partition, fresh.transport, fresh.cursor = (
        driver.partition,
        driver.transport,
        first.cursor,
    )
    again = await fresh.page()
    assert [i["id"] for i in again.items] == ["it-1", "it-2"]  # the first page, read again
    assert str(fresh.transport.requests[-1].url) == f"{ITEMS}?limit=2"
    last = await fresh.page()
    assert str(fresh.transport.requests[-1].url) == f"{ITEMS}?page=2" and not last.has_more


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("https://elsewhere.test/items?page=2", "another origin"),
        ("http://api.test/acme-corp/items?page=2", "another origin"),  # scheme changed
        (7, "not a string"),
    ],
)
async def test_a_next_url_elsewhere_is_not_followed(target: Any, why: str) -> None:
    driver = next_url_driver()
    driver.transport.add("GET", ITEMS, reply(json={"data": items(1), "links": {"next": target}}))
    with pytest.raises(BadBody) as raised:
        await driver.poll()
    assert why in str(raised.value) and "elsewhere" not in str(raised.value)
    assert len(driver.transport.requests) == 1


async def test_a_next_url_that_comes_round_again_stops_the_poll() -> None:
    driver = next_url_driver()
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1), "links": {"next": f"{ITEMS}?page=2"}}),
        reply(json={"data": items(2), "links": {"next": f"{ITEMS}?page=2"}}),
    )
    with pytest.raises(BadBody, match="loop"):
        await driver.poll()
    assert len(driver.transport.requests) == 2


async def test_a_graphql_cursor_goes_into_the_body_variables() -> None:
    # In a template, GraphQL's braces are written doubled; the vendor receives them single.
    written = {"query": "query($after: String) {{ issues(after: $after) {{ nodes {{ id }} }} }}"}
    query = {"query": "query($after: String) { issues(after: $after) { nodes { id } } }"}
    driver = Driver(
        compile_spec(
            spec(
                request={"url": f"{API}/graphql", "method": "POST", "body": written},
                records="data.issues.nodes",
                paginate={
                    "next_token": {
                        "path": "data.issues.pageInfo.endCursor",
                        "body": "variables.after",
                    },
                    "stop": {"path": "data.issues.pageInfo.hasNextPage", "equals": False},
                },
            )
        )
    )

    def page(ids: tuple[int, ...], end: str, more: bool) -> Any:
        info = {"endCursor": end, "hasNextPage": more}
        return reply(json={"data": {"issues": {"nodes": items(*ids), "pageInfo": info}}})

    driver.transport.add(
        "POST", f"{API}/graphql", page((1, 2), "c2", True), page((3,), "c3", False)
    )
    found = await driver.poll()
    assert [i["id"] for i in found] == ["it-1", "it-2", "it-3"]
    assert body_of(driver, 0) == query  # the first page sends the body as written
    assert body_of(driver, 1) == {**query, "variables": {"after": "c2"}}
    assert len(driver.transport.requests) == 2  # stop: the last page named a cursor all the same


async def test_page_numbers_and_sizes_in_a_search_body() -> None:
    driver = Driver(
        compile_spec(
            spec(
                request={"url": f"{API}/search", "method": "POST", "body": {"q": "open"}},
                paginate={"page": {"body": "page.number", "size_body": "page.size", "size": 2}},
            )
        )
    )
    driver.transport.add(
        "POST",
        f"{API}/search",
        reply(json={"data": items(1, 2)}),
        reply(json={"data": items(3)}),
    )
    await driver.poll()
    assert [body_of(driver, at) for at in (0, 1)] == [
        {"q": "open", "page": {"number": 1, "size": 2}},
        {"q": "open", "page": {"number": 2, "size": 2}},
    ]
    assert query_of(driver.transport.requests[1]) == {}


async def test_stop_on_an_offset_ends_before_a_short_page() -> None:
    driver = Driver(
        compile_spec(
            spec(
                paginate={
                    "offset": {"param": "offset", "size_param": "limit", "size": 2},
                    "stop": {"path": "has_more", "equals": False},
                }
            )
        )
    )
    driver.transport.add(
        "GET",
        f"{API}/items",
        reply(json={"data": items(1, 2), "has_more": True}),
        reply(json={"data": items(3, 4), "has_more": False}),
    )
    await driver.poll()
    assert [query_of(r) for r in driver.transport.requests] == [
        {"offset": "0", "limit": "2"},
        {"offset": "2", "limit": "2"},
    ]


@pytest.mark.parametrize(
    ("paginate", "method", "path", "says"),
    [
        (
            {"next_token": {"path": "n", "body": "after"}},
            "GET",
            "pollers[0].request.method",
            "POST",
        ),
        ({"next_token": {"path": "n"}}, "GET", "pollers[0].paginate.next_token", "param, body"),
        (
            {"next_token": {"path": "n", "param": "p", "body": "b"}},
            "POST",
            "pollers[0].paginate.next_token",
            "found param and body",
        ),
        (
            {"page": {"body": "p[0]", "size": 2}},
            "POST",
            "pollers[0].paginate.page.body",
            "only keys",
        ),
        (
            {"next_url": {"path": "n"}, "stop": {"path": "x"}},
            "GET",
            "pollers[0].paginate.stop",
            "set exactly one of",
        ),
        (
            {"stop": {"path": "x", "exists": True}},
            "GET",
            "pollers[0].paginate",
            "set exactly one of",
        ),
    ],
)
def test_a_paging_mistake_names_its_field(
    paginate: dict[str, Any], method: str, path: str, says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        compile_spec(spec(request={"url": f"{API}/items", "method": method}, paginate=paginate))
    assert raised.value.path == path
    assert says in str(raised.value)
