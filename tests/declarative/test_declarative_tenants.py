"""The ``http`` partition source: a tenants endpoint with its own auth and paging."""

from __future__ import annotations

from typing import Any

import pytest

from tests.declarative.helpers import API, compile_spec, query_of, spec
from watukuy.declarative.errors import PartitionSourceError
from watukuy.declarative.tenants import parse_http_source
from watukuy.http import ScriptedTransport, reply
from watukuy.http.scripted import Unreachable

TENANTS = f"{API}/tenants"
WHERE = "pollers[0].partitions.http"


def source(transport: ScriptedTransport, **overrides: Any) -> Any:
    raw: dict[str, Any] = {
        "url": TENANTS,
        "query": {"state": "active"},
        "auth": {"api_key": {"query": "api_key", "value": "adm1n-key"}},
        "records": "tenants",
        "key": "id",
        "data": {"slug": "slug", "token": "auth.token"},
    }
    raw.update(overrides)
    return parse_http_source(raw, where=WHERE, transport=transport)


def tenant(n: int) -> dict[str, Any]:
    return {"id": f"t{n}", "slug": f"s{n}", "auth": {"token": f"tok{n}"}, "plan": "pro"}


async def test_lists_every_page_with_the_data_it_names() -> None:
    transport = ScriptedTransport()
    transport.add(
        "GET",
        TENANTS,
        reply(json={"tenants": [tenant(1), tenant(2)], "next": "p2"}),
        reply(json={"tenants": [tenant(3)], "next": None}),
    )
    listing = source(transport, paginate={"next_token": {"path": "next", "param": "page"}})

    assert await listing() == [
        {"key": "t1", "data": {"slug": "s1", "token": "tok1"}},
        {"key": "t2", "data": {"slug": "s2", "token": "tok2"}},
        {"key": "t3", "data": {"slug": "s3", "token": "tok3"}},
    ]
    assert [query_of(r) for r in transport.requests] == [
        {"state": "active", "api_key": "adm1n-key"},
        {"state": "active", "page": "p2", "api_key": "adm1n-key"},
    ]
    assert transport.closed  # one client per refresh, closed after it


async def test_without_data_the_whole_record_is_the_data_and_refreshes_repeat() -> None:
    transport = ScriptedTransport()
    transport.add("GET", TENANTS, json={"tenants": [tenant(1)]})
    listing = source(transport, data=None)
    first = await listing()
    second = await listing()  # a second refresh reopens what the first closed
    assert first == second == [{"key": "t1", "data": tenant(1)}]


async def test_through_a_compiled_poller() -> None:
    transport = ScriptedTransport()
    transport.add("GET", TENANTS, json=[{"id": "acme", "slug": "acme-co"}])
    poller = compile_spec(
        spec(
            partitions={
                "http": {"url": TENANTS, "key": "id", "data": {"slug": "slug"}},
                "refresh": "1m",
            },
            request={"url": API + "/{partition.data.slug}/items"},
        ),
        transport=transport,
    )
    assert poller.partitions is not None and poller.partitions_refresh == 60
    assert await poller.partitions() == [{"key": "acme", "data": {"slug": "acme-co"}}]


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        (reply(500), f"{WHERE}: GET {TENANTS} -> 500"),
        (reply(401, json={"error": "bad key adm1n-key"}), f"{WHERE}: GET {TENANTS} -> 401"),
        (Unreachable(), f"{WHERE}: GET {TENANTS}: connection failed (scripted)"),
        (reply(200, body="{nope"), f"{WHERE}: GET {TENANTS}: malformed JSON"),
        (reply(200, json={"data": []}), f"{WHERE}: GET {TENANTS}: no records at 'tenants'"),
        (
            reply(200, json={"tenants": [tenant(1), {"id": 7, "slug": "sx"}]}),
            f"{WHERE}: record 1 has no non-empty string at key 'id'",
        ),
        (
            reply(200, json={"tenants": [{"id": "t9", "slug": "s9"}]}),
            f"{WHERE}: record 0 has no value at data.token ('auth.token')",
        ),
    ],
)
async def test_a_failed_refresh_names_the_source_and_status_not_the_secrets(
    answer: Any, text: str
) -> None:
    transport = ScriptedTransport()
    transport.add("GET", TENANTS, answer)
    with pytest.raises(PartitionSourceError) as caught:
        await source(transport)()
    assert str(caught.value).startswith(text)
    for secret in ("adm1n-key", "api_key=", "tok1", "s9", "sx"):
        assert secret not in str(caught.value)


async def test_oauth2_token_is_kept_between_refreshes() -> None:
    transport = ScriptedTransport()
    transport.add(
        "POST",
        f"{API}/token",
        json={"access_token": "adm-tok", "token_type": "bearer", "expires_in": 3600},
    )
    transport.add("GET", TENANTS, json={"tenants": [tenant(1)]})
    auth = {"oauth2": {"token_url": f"{API}/token", "client_id": "watukuy", "client_secret": "sec"}}
    listing = source(transport, auth=auth)
    await listing()
    await listing()
    assert transport.served("POST", f"{API}/token") == 1
    gets = [r for r in transport.requests if r.method == "GET"]
    assert [r.headers["Authorization"] for r in gets] == ["Bearer adm-tok"] * 2


async def test_a_key_that_is_not_a_path_is_a_config_error() -> None:
    from watukuy import ConfigError

    with pytest.raises(ConfigError) as caught:
        source(ScriptedTransport(), key="tenants[x]")
    assert caught.value.path == f"{WHERE}.key"
