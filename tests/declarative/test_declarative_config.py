"""Loading a declarative poller: every mistake is a ConfigError naming the path of the field,
and a valid entry becomes a Poller with the settings it describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.declarative.helpers import API, compile_spec, spec
from watukuy import ConfigError
from watukuy.declarative import DECLARATIVE_KEYS
from watukuy.declarative.reference import reference_markdown
from watukuy.options.declarative import children

STATIC = {"static": [{"key": "acme", "data": {"slug": "acme", "token": "t0ken-acme"}}]}
NEXT = {"next_token": {"path": "next", "param": "cursor"}}
PAGE = {"page": {"param": "page", "size": 10}}
TOKEN = {"token": {"path": "resume", "param": "cursor"}}


def request(**overrides: Any) -> dict[str, Any]:
    return {"url": f"{API}/items", **overrides}


# (overrides of the minimal spec, path of the error, words of the message)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown key", {"identiy": "id"}, "pollers[0].identiy", "did you mean 'identity'?"),
    ("unknown request key", {"request": {"urll": API}}, "pollers[0].request.urll", "did you mean"),
    ("name", {"name": "tick ets"}, "pollers[0].name", "[A-Za-z0-9._-]+"),
    ("identity required", {"identity": None}, "pollers[0].identity", "is required"),
    ("request required", {"request": None}, "pollers[0].request", "is required"),
    ("url required", {"request": {"method": "GET"}}, "pollers[0].request.url", "is required"),
    (
        "method",
        {"request": request(method="PUT")},
        "pollers[0].request.method",
        "must be one of: GET, POST; got 'PUT'",
    ),
    (
        "body on GET",
        {"request": request(body={"q": 1})},
        "pollers[0].request.body",
        "a body needs method: POST",
    ),
    (
        "two paginations",
        {"paginate": {**NEXT, **PAGE}},
        "pollers[0].paginate",
        "set exactly one of: next_token, next_url, link_header, page, offset; "
        "found next_token and page",
    ),
    ("no pagination", {"paginate": {}}, "pollers[0].paginate", "set exactly one of"),
    (
        "two auths",
        {"request": request(auth={"bearer": "x", "basic": {"username": "u", "password": "p"}})},
        "pollers[0].request.auth",
        "found bearer and basic",
    ),
    (
        "api key in both places",
        {"request": request(auth={"api_key": {"header": "X-Key", "query": "k", "value": "v"}})},
        "pollers[0].request.auth.api_key",
        "set exactly one of: header, query; found header and query",
    ),
    (
        "oauth2 needs a secret",
        {"request": request(auth={"oauth2": {"token_url": f"{API}/t", "client_id": "c"}})},
        "pollers[0].request.auth.oauth2.client_secret",
        "is required",
    ),
    (
        "oauth2 client_auth",
        {
            "request": request(
                auth={
                    "oauth2": {
                        "token_url": f"{API}/t",
                        "client_id": "c",
                        "client_secret": "s",
                        "client_auth": "header",
                    }
                }
            )
        },
        "pollers[0].request.auth.oauth2.client_auth",
        "must be one of: basic, body",
    ),
    (
        "two cursors",
        {"cursor": {**TOKEN, "none": True}},
        "pollers[0].cursor",
        "found token and none",
    ),
    (
        "a cursor never sent",
        {"cursor": {"token": {"path": "resume"}}},
        "pollers[0].cursor",
        "the cursor is never sent: set token.param, or use {cursor} in the request",
    ),
    (
        "link_header false",
        {"paginate": {"link_header": False}},
        "pollers[0].paginate.link_header",
        "must be true",
    ),
    (
        "page size zero",
        {"paginate": {"page": {"param": "page", "size": 0}}},
        "pollers[0].paginate.page.size",
        "must be a positive integer, got 0",
    ),
    (
        "page size missing",
        {"paginate": {"page": {"param": "page"}}},
        "pollers[0].paginate.page.size",
        "is required",
    ),
    (
        "offset size not a number",
        {"paginate": {"offset": {"param": "offset", "size": "100"}}},
        "pollers[0].paginate.offset.size",
        "must be a positive integer, got a str",
    ),
    (
        "unknown placeholder",
        {"request": request(url=f"{API}/{{partition.dta.slug}}/items")},
        "pollers[0].request.url",
        "unknown placeholder {partition.dta.slug}; known: {partition.key}, {tenant.key}, "
        "{partition.data.NAME}, {cursor}, {parent.key}",
    ),
    (
        "url without an http(s) scheme",
        {"request": request(url="htps://api.test/items")},
        "pollers[0].request.url",
        "must be an absolute http:// or https:// URL",
    ),
    (
        "relative url",
        {"request": request(url="/items")},
        "pollers[0].request.url",
        "must be an absolute http:// or https:// URL",
    ),
    (
        "data without partitions",
        {"request": request(url=f"{API}/{{partition.data.slug}}/items")},
        "pollers[0].request.url",
        "{partition.data...} needs partitions: this poller has none",
    ),
    (
        "cursor placeholder without a cursor",
        {"request": request(query={"since": "{cursor}"})},
        "pollers[0].request.query.since",
        "{cursor} is always empty with cursor: {none: true}",
    ),
    (
        "format spec",
        {"request": request(headers={"X-Page": "{partition.key:>5}"})},
        "pollers[0].request.headers.X-Page",
        "placeholders take no format spec or conversion",
    ),
    (
        "unbalanced brace",
        {"request": request(headers={"X-Json": '{"a": 1'})},
        "pollers[0].request.headers.X-Json",
        "write {{ and }} for literal braces",
    ),
    (
        "placeholder in the body",
        {"request": request(method="POST", body={"filter": ["{partition.nope}"]})},
        "pollers[0].request.body.filter[0]",
        "unknown placeholder {partition.nope}",
    ),
    (
        "placeholder in auth",
        {"request": request(auth={"bearer": "{partition.data.token}"})},
        "pollers[0].request.auth.bearer",
        "needs partitions",
    ),
    (
        "query value a mapping",
        {"request": request(query={"filter": {"a": 1}})},
        "pollers[0].request.query.filter",
        "must be a string or a number, got a mapping",
    ),
    ("bad path", {"identity": "meta..id"}, "pollers[0].identity", "invalid path 'meta..id'"),
    ("bad index", {"records": "data[first]"}, "pollers[0].records", "expected [n]"),
    (
        "bad token path",
        {"paginate": {"next_token": {"path": "meta.", "param": "c"}}},
        "pollers[0].paginate.next_token.path",
        "a name is missing after '.'",
    ),
    (
        "bare number interval",
        {"schedule": {"min": 30}},
        "pollers[0].schedule.min",
        "a bare number; Connect users mean milliseconds",
    ),
    (
        "bare number timeout",
        {"request": request(timeout=5000)},
        "pollers[0].request.timeout",
        "a bare number; Connect users mean milliseconds",
    ),
    (
        "bare number lookback",
        {"cursor": {"timestamp": {"field": "updated_at", "param": "since", "lookback": 60}}},
        "pollers[0].cursor.timestamp.lookback",
        "a bare number; Connect users mean milliseconds",
    ),
    (
        "bare number retain",
        {"retain": 86400},
        "pollers[0].retain",
        "a bare number; Connect users mean milliseconds",
    ),
    (
        "bare number cooldown",
        {"circuit": {"cooldown": 30}},
        "pollers[0].circuit.cooldown",
        "a bare number; Connect users mean milliseconds",
    ),
    ("bad duration", {"schedule": {"max": "15 minutes"}}, "pollers[0].schedule.max", "like"),
    (
        "min above max",
        {"schedule": {"min": "10m", "max": "1m"}},
        "pollers[0].schedule.min",
        "greater than max",
    ),
    (
        "on_status action",
        {"on_status": {404: "skip"}},
        "pollers[0].on_status.404",
        "must be one of: ok, ignore, retry, rate-limited, fail, restart; got 'skip'",
    ),
    (
        "on_status code",
        {"on_status": {"4x": "fail"}},
        "pollers[0].on_status.4x",
        "must be an HTTP status from 200 to 599",
    ),
    (
        "on_status out of range",
        {"on_status": {600: "fail"}},
        "pollers[0].on_status.600",
        "must be an HTTP status",
    ),
    (
        "on_status 304",
        {"on_status": {304: "ignore"}},
        "pollers[0].on_status.304",
        "cannot be configured",
    ),
    (
        "on_status twice",
        {"on_status": {404: "ignore", "404": "fail"}},
        "pollers[0].on_status.404",
        "given twice",
    ),
    (
        "budget weight",
        {"budget_weight": -1},
        "pollers[0].budget_weight",
        "must be a positive number",
    ),
    ("topic", {"topic": "bad topic!"}, "pollers[0].topic", "must be a Kafka topic name"),
    ("max_pages", {"max_pages": 0}, "pollers[0].max_pages", "positive integer"),
    (
        "partitions source",
        {"partitions": {"static": [], "file": "x.yaml"}},
        "pollers[0].partitions",
        "exactly one of",
    ),
    (
        "tenants endpoint without key",
        {"partitions": {"http": {"url": f"{API}/tenants"}}},
        "pollers[0].partitions.http.key",
        "is required",
    ),
    (
        "placeholder in the tenants endpoint",
        {
            "partitions": {
                "http": {"url": f"{API}/tenants", "key": "id", "auth": {"bearer": "{cursor}"}}
            }
        },
        "pollers[0].partitions.http.auth.bearer",
        "no placeholders here",
    ),
    (
        "tenants paginate",
        {
            "partitions": {
                "http": {"url": f"{API}/tenants", "key": "id", "paginate": {"pages": True}}
            }
        },
        "pollers[0].partitions.http.paginate.pages",
        "did you mean 'page'?",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "path", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_mistake_names_its_field(overrides: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        compile_spec(spec(**overrides))
    assert caught.value.path == path
    assert words in str(caught.value)


def test_a_secret_with_braces_is_not_echoed() -> None:
    # ${env:TOKEN} was resolved before the poller sees it; its braces parse as a placeholder.
    with pytest.raises(ConfigError) as caught:
        compile_spec(spec(request=request(auth={"bearer": "ab{s3cr3t-v4lue}cd"})))
    assert caught.value.path == "pollers[0].request.auth.bearer"
    assert "s3cr3t" not in str(caught.value)
    assert "unknown placeholder (12 characters)" in str(caught.value)


def test_a_valid_entry_becomes_a_poller_with_its_settings(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    schema = {"type": "record", "name": "Ticket", "fields": [{"name": "id", "type": "string"}]}
    (tmp_path / "schemas" / "ticket.avsc").write_text(json.dumps(schema))
    poller = compile_spec(
        spec(
            partitions={**STATIC, "refresh": "2m"},
            request=request(
                url=f"{API}/{{partition.data.slug}}/items",
                timeout="20s",
                auth={"bearer": "{partition.data.token}"},
            ),
            paginate=NEXT,
            cursor=TOKEN,
            schedule={"min": "10s", "max": "5m"},
            budget="vendor",
            budget_weight=2,
            max_pages=7,
            reconcile="1h",
            circuit={"failure_threshold": 3, "cooldown": "1m"},
            topic="tickets.events",
            schema="schemas/ticket.avsc",  # relative to the config file, not the cwd
            schema_version=2,
            retain="7d",
        ),
        base_dir=tmp_path,
    )
    assert poller.name == "tickets"
    assert poller.partitioned and poller.partitions_refresh == 120
    assert poller.cursor.strategy == "token" and poller.cursor.initial is None
    assert (poller.schedule.min, poller.schedule.max) == (10, 300)
    assert (poller.budget, poller.budget_weight, poller.max_pages) == ("vendor", 2, 7)
    assert (poller.reconcile, poller.retain, poller.fetch_timeout) == (3600, 7 * 86400, 20)
    assert (poller.circuit.failure_threshold, poller.circuit.cooldown) == (3, 60)
    assert (poller.topic, poller.schema_version) == ("tickets.events", 2)
    assert poller.schema["name"] == "Ticket"
    assert poller.identity({"id": "t-1"}) == "t-1"


def test_cursor_none_and_no_cursor_are_full_listings() -> None:
    assert compile_spec(spec(cursor={"none": True})).cursor.strategy == "none"
    assert compile_spec(spec()).cursor.strategy == "none"


def test_the_contract_example_loads() -> None:
    """The CONTRACT's example entry (its secrets resolved), as written."""
    entry = {
        "name": "tickets",
        "partitions": {
            "static": [{"key": "acme", "data": {"slug": "acme", "token": "resolved"}}],
            "refresh": "5m",
        },
        "request": {
            "url": "https://api.example.com/{partition.data.slug}/tickets",
            "method": "GET",
            "query": {"limit": 100},
            "headers": {"Accept": "application/json"},
            "body": {},
            "timeout": "30s",
            "auth": {"bearer": "{partition.data.token}"},
        },
        "records": "data",
        "identity": "id",
        "version": "updated_at",
        "paginate": {"next_token": {"path": "next", "param": "cursor"}},
        "cursor": {"token": {"path": "resume", "param": "cursor"}},
        "on_status": {404: "ignore"},
        "schedule": {"min": "30s", "max": "15m"},
        "budget": "vendor",
        "budget_weight": 1,
        "topic": "tickets.events",
        "retain": "30d",
    }
    poller = compile_spec(entry)
    assert poller.name == "tickets" and poller.fetch_timeout == 30


def test_every_section_of_the_key_table_is_what_the_parser_accepts() -> None:
    """The key table is the parser's list of known keys: a key it lists is accepted, and the
    unknown-key error offers exactly the table's names."""
    assert children("cursor") == ("token", "timestamp", "none")
    assert children("paginate.page") == (
        "param",
        "body",
        "start",
        "size_param",
        "size_body",
        "size",
    )
    with pytest.raises(ConfigError) as caught:
        compile_spec(spec(cursor={"timestamp": {"field": "t", "param": "s", "look": "1s"}}))
    assert caught.value.path == "pollers[0].cursor.timestamp.look"
    assert "did you mean 'lookback'?" in str(caught.value)
    paths = [doc.path for doc in DECLARATIVE_KEYS]
    assert len(paths) == len(set(paths))
    for doc in DECLARATIVE_KEYS:  # every key's parent is in the table too
        parent = doc.path.rpartition(".")[0]
        assert not parent or parent in paths, doc.path


def test_the_reference_is_a_markdown_table_of_every_key() -> None:
    text = reference_markdown()
    lines = text.splitlines()
    assert lines[0] == "| key | type | default | description |"
    assert len(lines) == 2 + len(DECLARATIVE_KEYS)
    assert (
        "| `paginate.page.size` | int |  | **Required.** Page size; a page with fewer records "
        "is the last. |" in lines
    )
    assert "| `request.method` | GET \\| POST | `GET` | HTTP method. |" in lines
    assert all(line.count(" | ") == 3 for line in lines if "\\|" not in line)
    assert text == reference_markdown()  # deterministic
