"""Pages within a poll (``paginate``) and the cursor between polls (``cursor``): what the vendor
receives on each page and each poll, and what the engine is given to store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, spec
from watukuy import Partition
from watukuy.declarative.errors import BadBody
from watukuy.declarative.listings import PageLoop
from watukuy.http import reply

ITEMS = f"{API}/items"


def items(*ids: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": f"it-{i}", **extra} for i in ids]


# -- paginate -----------------------------------------------------------------------------


async def test_next_token_follows_the_body_until_null_or_absent() -> None:
    driver = Driver(
        compile_spec(
            spec(
                request={"url": ITEMS, "query": {"limit": 2}},
                paginate={"next_token": {"path": "meta.next", "param": "page_token"}},
            )
        )
    )
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1, 2), "meta": {"next": "p2"}}),
        reply(json={"data": items(3, 4), "meta": {"next": "p3"}}),
        reply(json={"data": items(5), "meta": {"next": None}}),
        reply(json={"data": items(1), "meta": {}}),  # absent ends the listing too
    )

    first = await driver.poll()
    second = await driver.poll()

    assert [i["id"] for i in first] == [f"it-{i}" for i in (1, 2, 3, 4, 5)]
    assert [i["id"] for i in second] == ["it-1"]
    assert driver.queries() == [
        {"limit": "2"},
        {"limit": "2", "page_token": "p2"},
        {"limit": "2", "page_token": "p3"},
        {"limit": "2"},  # a new poll starts from the first page
    ]
    assert [p.has_more for p in driver.pages] == [True, True, False, False]


async def test_a_token_that_repeats_stops_the_poll_with_an_error_naming_the_paginator() -> None:
    driver = Driver(compile_spec(spec(paginate={"next_token": {"path": "next", "param": "p"}})))
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1), "next": "secret-slug-1"}),
        reply(json={"data": items(2), "next": "secret-slug-1"}),
    )
    with pytest.raises(PageLoop) as raised:
        await driver.poll()
    assert len(driver.transport.requests) == 2  # not a third
    assert "pollers[0].paginate" in str(raised.value) and "loop" in str(raised.value)
    assert "secret-slug" not in str(raised.value)


async def test_a_listing_that_comes_round_again_is_stopped_but_a_page_asked_twice_is_not() -> None:
    driver = Driver(compile_spec(spec(paginate={"next_token": {"path": "next", "param": "p"}})))
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1), "next": "a"}),
        reply(json={"data": items(2), "next": "b"}),
        reply(json={"data": items(2), "next": "b"}),  # page "a" again (a retry): same next
        reply(json={"data": items(3), "next": "a"}),  # "b" names "a", already left: a loop
    )
    await driver.page()
    at_a = driver.cursor
    await driver.page()
    driver.cursor = at_a  # the engine rolled the key back to page "a" and asks it again
    await driver.page()
    with pytest.raises(PageLoop):
        await driver.page()


async def test_page_numbers_stop_on_a_short_page() -> None:
    driver = Driver(
        compile_spec(
            spec(paginate={"page": {"param": "page", "size_param": "per_page", "size": 2}})
        )
    )
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1, 2)}),
        reply(json={"data": items(3, 4)}),
        reply(json={"data": items(5)}),
    )
    assert len(await driver.poll()) == 5
    assert driver.queries() == [
        {"page": "1", "per_page": "2"},
        {"page": "2", "per_page": "2"},
        {"page": "3", "per_page": "2"},
    ]


async def test_page_numbers_from_zero_stop_on_an_empty_page() -> None:
    driver = Driver(compile_spec(spec(paginate={"page": {"param": "p", "start": 0, "size": 1}})))
    driver.transport.add("GET", ITEMS, reply(json={"data": items(1)}), reply(json={"data": []}))
    await driver.poll()
    assert driver.queries() == [{"p": "0"}, {"p": "1"}]


async def test_offsets_advance_by_the_page_size() -> None:
    driver = Driver(
        compile_spec(
            spec(paginate={"offset": {"param": "offset", "size_param": "limit", "size": 2}})
        )
    )
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1, 2)}),
        reply(json={"data": items(3, 4)}),
        reply(json={"data": []}),
    )
    assert len(await driver.poll()) == 4
    assert driver.queries() == [
        {"offset": "0", "limit": "2"},
        {"offset": "2", "limit": "2"},
        {"offset": "4", "limit": "2"},
    ]


async def test_link_header_is_followed_and_stored_without_the_host() -> None:
    # A tenant host is partition data: the stored position must not hold it.
    entry = spec(
        partitions={"static": [{"key": "acme", "data": {"host": "acme.api.test"}}]},
        request={"url": "https://{partition.data.host}/v1/items", "query": {"per_page": 2}},
        paginate={"link_header": True},
    )
    driver = Driver(compile_spec(entry))
    driver.partition = Partition("acme", {"host": "acme.api.test"})
    base = "https://acme.api.test/v1/items"
    driver.transport.add(
        "GET",
        base,
        reply(
            json={"data": items(1, 2)},
            headers={
                "Link": f'<{base}?page=2&per_page=2>; rel="next", <{base}?page=9>; rel="last"'
            },
        ),
        reply(
            json={"data": items(3, 4)},
            headers={"Link": '</v1/items?page=3&per_page=2>; rel="next"'},
        ),
        reply(json={"data": items(5)}, headers={"Link": f'<{base}?page=1>; rel="first"'}),
    )

    assert len(await driver.poll()) == 5
    assert driver.queries() == [
        {"per_page": "2"},
        {"page": "2", "per_page": "2"},
        {"page": "3", "per_page": "2"},
    ]
    middle = driver.pages[0].cursor
    assert middle == {"page": "?page=2&per_page=2", "resume": None}
    assert "acme" not in repr([p.cursor for p in driver.pages])
    assert driver.pages[-1].cursor is None and driver.pages[-1].has_more is False


async def test_link_header_to_another_host_is_refused() -> None:
    driver = Driver(compile_spec(spec(paginate={"link_header": True})))
    driver.transport.add(
        "GET",
        ITEMS,
        reply(
            json={"data": items(1)},
            headers={"Link": '<https://evil.test/items?page=2>; rel="next"'},
        ),
    )
    with pytest.raises(BadBody, match="another origin; not followed"):
        await driver.page()


async def test_link_header_drops_the_api_key_from_what_it_stores() -> None:
    driver = Driver(
        compile_spec(
            spec(
                request={"url": ITEMS, "auth": {"api_key": {"query": "key", "value": "s3cret"}}},
                paginate={"link_header": True},
            )
        )
    )
    driver.transport.add(
        "GET",
        ITEMS,
        reply(
            json={"data": items(1)}, headers={"Link": f'<{ITEMS}?page=2&key=s3cret>; rel="next"'}
        ),
        reply(json={"data": items(2)}),
    )
    await driver.poll()
    assert driver.pages[0].cursor == {"page": "?page=2", "resume": None}
    assert driver.queries() == [{"key": "s3cret"}, {"page": "2", "key": "s3cret"}]


async def test_max_pages_leftovers_continue_where_the_listing_stopped() -> None:
    driver = Driver(compile_spec(spec(paginate={"page": {"param": "page", "size": 1}})))
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1)}),
        reply(json={"data": items(2)}),
        reply(json={"data": items(3)}),
        reply(json={"data": []}),
    )
    await driver.poll(max_pages=2)  # what the engine does at max_pages
    assert driver.cursor == {"page": 3, "resume": None}
    await driver.poll()
    assert [q["page"] for q in driver.queries()] == ["1", "2", "3", "4"]


# -- cursor ---------------------------------------------------------------------------------


async def test_token_cursor_sends_the_last_pages_value_on_the_next_poll() -> None:
    driver = Driver(
        compile_spec(
            spec(
                paginate={"next_token": {"path": "next", "param": "page"}},
                cursor={"token": {"path": "sync.token", "param": "since"}},
            )
        )
    )
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1), "next": "p2", "sync": {"token": "ignored"}}),
        reply(json={"data": items(2), "next": None, "sync": {"token": "s1"}}),
        reply(json={"data": [], "next": None, "sync": {"token": "s2"}}),
        reply(json={"data": [], "next": None}),  # no token: the previous one is kept
        reply(json={"data": [], "next": None}),
    )

    await driver.poll()
    assert driver.pages[0].cursor == {"page": "p2", "resume": None}
    assert driver.cursor == "s1"
    await driver.poll()
    assert driver.cursor == "s2"
    await driver.poll()
    assert driver.cursor == "s2"
    await driver.poll()

    assert driver.queries() == [
        {},
        {"page": "p2"},
        {"since": "s1"},
        {"since": "s2"},
        {"since": "s2"},
    ]


async def test_token_cursor_and_page_token_in_one_parameter_like_the_simulator() -> None:
    """``next`` and ``resume`` both travel in ``cursor``: the page token wins mid-listing."""
    driver = Driver(
        compile_spec(
            spec(
                request={"url": ITEMS, "query": {"limit": 1}},
                paginate={"next_token": {"path": "next", "param": "cursor"}},
                cursor={"token": {"path": "resume", "param": "cursor"}},
            )
        )
    )
    driver.cursor = "r0"  # e.g. set by `watukuy-source reset --to r0`
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1), "next": "n1", "resume": "r1"}),
        reply(json={"data": items(2), "next": None, "resume": "r2"}),
    )
    await driver.poll()
    assert driver.queries() == [{"limit": "1", "cursor": "r0"}, {"limit": "1", "cursor": "n1"}]
    assert driver.pages[0].cursor == {"page": "n1", "resume": "r0"}
    assert driver.cursor == "r2"


async def test_timestamp_cursor_sends_the_greatest_time_seen_minus_lookback() -> None:
    driver = Driver(
        compile_spec(
            spec(
                paginate={"page": {"param": "page", "size": 2}},
                cursor={
                    "timestamp": {
                        "field": "meta.updated_at",
                        "param": "updated_since",
                        "lookback": "5m",
                    }
                },
            )
        )
    )

    def item(n: int, at: Any) -> dict[str, Any]:
        return {"id": f"it-{n}", "meta": {"updated_at": at}}

    driver.transport.add(
        "GET",
        ITEMS,
        reply(
            json={"data": [item(1, "2026-03-01T10:00:00Z"), item(2, "2026-03-01T12:30:00+02:00")]}
        ),
        reply(json={"data": [item(3, "2026-03-01T09:00:00Z")]}),
        reply(json={"data": [item(4, 1_772_370_000)]}),  # epoch seconds: 2026-03-01T13:00:00Z
        reply(json={"data": []}),
    )

    await driver.poll()
    # 12:30+02:00 is 10:30Z, the greatest; the running max is kept mid-listing.
    assert driver.pages[0].cursor == {"page": 2, "resume": None, "max": "2026-03-01T10:30:00Z"}
    assert driver.cursor == "2026-03-01T10:30:00Z"
    await driver.poll()
    assert driver.cursor == "2026-03-01T13:00:00Z"
    await driver.poll()  # nothing new: the watermark stays

    assert driver.cursor == "2026-03-01T13:00:00Z"
    assert driver.queries() == [
        {"page": "1"},
        {"page": "2"},
        {"page": "1", "updated_since": "2026-03-01T10:25:00Z"},
        {"page": "1", "updated_since": "2026-03-01T12:55:00Z"},
    ]


async def test_timestamp_cursor_in_a_post_body_keeps_its_type() -> None:
    driver = Driver(
        compile_spec(
            spec(
                request={
                    "url": ITEMS,
                    "method": "POST",
                    "body": {"since": "{cursor}", "filter": "from {cursor}", "limit": 50},
                },
                cursor={"timestamp": {"field": "at"}},
            )
        )
    )
    driver.cursor = "2026-01-02T03:04:05.5Z"
    driver.transport.add("POST", ITEMS, json={"data": []})
    await driver.poll()
    sent = json.loads(driver.transport.requests[0].body or b"")
    assert sent == {
        "since": "2026-01-02T03:04:05.500000Z",
        "filter": "from 2026-01-02T03:04:05.500000Z",
        "limit": 50,
    }


async def test_a_parameter_that_is_only_the_cursor_is_left_out_until_there_is_one() -> None:
    driver = Driver(
        compile_spec(
            spec(
                request={"url": ITEMS, "query": {"since": "{cursor}", "q": "x{cursor}"}},
                cursor={"token": {"path": "sync"}},  # sent by the template, not a param
            )
        )
    )
    driver.transport.add(
        "GET", ITEMS, reply(json={"data": [], "sync": "s1"}), reply(json={"data": []})
    )
    await driver.poll()
    await driver.poll()
    assert driver.queries() == [{"q": "x"}, {"since": "s1", "q": "xs1"}]


async def test_a_body_placeholder_alone_keeps_the_datas_type() -> None:
    entry = spec(
        partitions={"static": [{"key": "acme", "data": {"n": 1}}]},
        request={
            "url": ITEMS,
            "method": "POST",
            "body": {
                "limit": "{partition.data.limit}",
                "tags": "{partition.data.tags}",
                "label": "n={partition.data.limit}",
                "key": "{partition.key}",
            },
        },
    )
    driver = Driver(compile_spec(entry), partition=Partition("acme", {"limit": 50, "tags": ["a"]}))
    driver.transport.add("POST", ITEMS, json={"data": []})
    await driver.poll()
    assert json.loads(driver.transport.requests[0].body or b"") == {
        "limit": 50,
        "tags": ["a"],
        "label": "n=50",
        "key": "acme",
    }


async def test_a_bad_timestamp_cursor_fails_the_poll_with_a_hint() -> None:
    driver = Driver(compile_spec(spec(cursor={"timestamp": {"field": "at", "param": "since"}})))
    driver.cursor = "yesterday"
    with pytest.raises(Exception, match="not an ISO-8601 time; reset it with --to"):
        await driver.page()
    assert driver.transport.requests == []


async def test_cursor_none_lists_everything_each_poll() -> None:
    driver = Driver(
        compile_spec(spec(paginate={"page": {"param": "page", "size": 1}}, cursor={"none": True}))
    )
    driver.transport.add(
        "GET",
        ITEMS,
        reply(json={"data": items(1)}),
        reply(json={"data": []}),
        reply(json={"data": items(1)}),
        reply(json={"data": []}),
    )
    await driver.poll()
    assert driver.cursor is None
    await driver.poll()
    assert [q["page"] for q in driver.queries()] == ["1", "2", "1", "2"]


# -- records ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("records", "body", "expected"),
    [
        ("", [{"id": "a"}], ["a"]),
        ("result.items", {"result": {"items": [{"id": "a"}, {"id": "b"}]}}, ["a", "b"]),
        ("pages[1]", {"pages": [[{"id": "x"}], [{"id": "b"}]]}, ["b"]),
        ('["@odata.value"]', {"@odata.value": [{"id": "o"}]}, ["o"]),
        ("data", {"data": None}, []),
    ],
)
async def test_records_paths(records: str, body: Any, expected: list[str]) -> None:
    driver = Driver(compile_spec(spec(records=records)))
    driver.transport.add("GET", ITEMS, json=body)
    assert [i["id"] for i in await driver.poll()] == expected


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"items": []}, "GET https://api.test/items: no records at 'data' in the body"),
        ({"data": {"id": 1}}, "records at 'data' is a mapping, not a list"),
    ],
)
async def test_records_that_are_not_a_list_fail_the_poll(body: Any, words: str) -> None:
    driver = Driver(compile_spec(spec()))
    driver.transport.add("GET", ITEMS, json=body)
    with pytest.raises(BadBody) as caught:
        await driver.page()
    assert words in str(caught.value)
