"""Every key of a declarative poller, as data: the parser's known keys, defaults and the config
config reference (:func:`watukuy.declarative.reference.reference_markdown`) all come from here.
It lives below both ``config`` (which renders and redacts with it) and ``declarative`` (which
parses with it), so neither has to reach into the other for it.

A :class:`KeyDoc` per key, by dotted path from the poller entry (``paginate.page.size``). A
mapping whose children are listed here accepts only those keys (an unknown one is a
``ConfigError`` with "did you mean"); a mapping without listed children is free-form
(``query``, ``headers``, ``on_status``). ``one_of`` marks a mapping of alternatives: exactly
one of its children must be set. ``auth`` and ``paginate`` appear twice, under ``request`` and
under ``partitions.http``: both are generated from one description.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.validation import check_keys
from watukuy.options.keydoc import KeyDoc

__all__ = [
    "CONNECTOR_ONLY",
    "DECLARATIVE_KEYS",
    "STREAM_ONLY",
    "check_section",
    "children",
    "default_of",
    "key_doc",
]


def _auth(prefix: str, templates: bool) -> list[KeyDoc]:
    value = "template" if templates else "string"
    return [
        KeyDoc(
            f"{prefix}",
            "mapping",
            None,
            "Authentication; exactly one of the keys below.",
            one_of=True,
        ),
        KeyDoc(
            f"{prefix}.bearer", value, None, "Sends `Authorization: Bearer <value>`.", secret=True
        ),
        KeyDoc(f"{prefix}.basic", "mapping", None, "HTTP basic authentication."),
        KeyDoc(f"{prefix}.basic.username", value, None, "User name.", required=True),
        KeyDoc(f"{prefix}.basic.password", value, None, "Password.", required=True, secret=True),
        KeyDoc(
            f"{prefix}.api_key",
            "mapping",
            None,
            "An API key in a header or a query parameter (exactly one of `header`, `query`).",
        ),
        KeyDoc(f"{prefix}.api_key.header", "string", None, "Header name, e.g. `X-Api-Key`."),
        KeyDoc(f"{prefix}.api_key.query", "string", None, "Query parameter name."),
        KeyDoc(f"{prefix}.api_key.value", value, None, "The key.", required=True, secret=True),
        KeyDoc(
            f"{prefix}.oauth2",
            "mapping",
            None,
            "OAuth2 client credentials: the token is cached until it expires and fetched "
            "again after a 401 (the request is retried once).",
        ),
        KeyDoc(f"{prefix}.oauth2.token_url", value, None, "Token endpoint (POST).", required=True),
        KeyDoc(f"{prefix}.oauth2.client_id", value, None, "Client id.", required=True),
        KeyDoc(
            f"{prefix}.oauth2.client_secret",
            value,
            None,
            "Client secret.",
            required=True,
            secret=True,
        ),
        KeyDoc(f"{prefix}.oauth2.scope", value, None, "Requested scope (space-separated)."),
        KeyDoc(
            f"{prefix}.oauth2.client_auth",
            "basic | body",
            "basic",
            "How the client authenticates: HTTP basic, or `client_id`/`client_secret` in "
            "the form body.",
        ),
    ]


def _paginate(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "Pages within one poll; exactly one of the keys below. Without it: one page.",
            one_of=True,
        ),
        *_next_token(f"{prefix}.next_token"),
        KeyDoc(
            f"{prefix}.link_header",
            "true",
            None,
            'Follow `Link: <...>; rel="next"` (same origin only).',
        ),
        *_page_numbers(f"{prefix}.page"),
        *_offsets(f"{prefix}.offset"),
    ]


def _next_token(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "A token in the body names the next page; stop when it is null, absent or ''.",
        ),
        KeyDoc(f"{prefix}.path", "path", None, "Where the token is in the body.", required=True),
        KeyDoc(
            f"{prefix}.param",
            "string",
            None,
            "Query parameter the token is sent in.",
            required=True,
        ),
    ]


def _page_numbers(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(prefix, "mapping", None, "Page numbers; stop on a short page."),
        KeyDoc(
            f"{prefix}.param",
            "string",
            None,
            "Query parameter of the page number.",
            required=True,
        ),
        KeyDoc(f"{prefix}.start", "int", 1, "The first page's number."),
        KeyDoc(f"{prefix}.size_param", "string", None, "Query parameter of the page size."),
        _page_size(f"{prefix}.size"),
    ]


def _offsets(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(prefix, "mapping", None, "Record offsets; stop on a short page."),
        KeyDoc(
            f"{prefix}.param",
            "string",
            None,
            "Query parameter of the offset (from 0).",
            required=True,
        ),
        KeyDoc(f"{prefix}.size_param", "string", None, "Query parameter of the page size."),
        _page_size(f"{prefix}.size"),
    ]


def _page_size(path: str) -> KeyDoc:
    return KeyDoc(
        path, "int", None, "Page size; a page with fewer records is the last.", required=True
    )


def _transform(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "What is published of each item; the steps run in the order below, whatever "
            "order they are written in. Paths are dotted keys (`reporter.email`). A changed "
            "transform reshapes only items polled from then on: `validate` warns when it "
            "differs from the one the poller last published with; `replay` republishes "
            "history.",
        ),
        KeyDoc(
            f"{prefix}.filter",
            "mapping",
            None,
            "Publish only matching items: `{path, equals|in|exists|matches: value}`, "
            "`{all: [...]}`, `{any: [...]}`, `{not: ...}`. An item that stops matching is "
            "published once as `deleted`.",
        ),
        KeyDoc(f"{prefix}.select", "list", None, "Keep only these paths, where they are nested."),
        KeyDoc(f"{prefix}.drop", "list", None, "Remove these paths."),
        KeyDoc(f"{prefix}.rename", "mapping", None, "Source path -> target path."),
        KeyDoc(
            f"{prefix}.mask",
            "mapping",
            None,
            "Path -> `{hmac: ${env:KEY}}` (lowercase hex HMAC-SHA256; the key must be a "
            "secret reference) or `{redact: TEXT}`.",
        ),
        KeyDoc(
            f"{prefix}.set",
            "mapping",
            None,
            "Key -> literal or template over `{partition.key}`, `{parent.key}`, `{item.PATH}` "
            "(never `{partition.data...}`).",
        ),
    ]


_TENANTS = "partitions.http"

DECLARATIVE_KEYS: tuple[KeyDoc, ...] = (
    KeyDoc("name", "string", None, "Poller name, `[A-Za-z0-9._-]+`.", required=True),
    KeyDoc(
        "partitions",
        "mapping",
        None,
        "Tenants; exactly one of `static`, `file`, `http`, `python`. Without it: one "
        "partition, key `''`.",
    ),
    KeyDoc("partitions.static", "list", None, "Inline list of `{key, data}`."),
    KeyDoc(
        "partitions.file",
        "string",
        None,
        "YAML/JSON file with a list of `{key, data}`, relative to the config file; re-read "
        "at each refresh.",
    ),
    KeyDoc(
        _TENANTS,
        "mapping",
        None,
        "A tenants endpoint, called at each refresh. No templates in its values.",
    ),
    KeyDoc(f"{_TENANTS}.url", "string", None, "Absolute http(s) URL.", required=True),
    KeyDoc(f"{_TENANTS}.method", "GET | POST", "GET", "HTTP method."),
    KeyDoc(f"{_TENANTS}.query", "mapping", None, "Query parameters."),
    KeyDoc(f"{_TENANTS}.headers", "mapping", None, "Request headers."),
    KeyDoc(f"{_TENANTS}.body", "JSON", None, "JSON body (POST only)."),
    KeyDoc(f"{_TENANTS}.timeout", "duration", "30s", "Timeout of each request."),
    *_auth(f"{_TENANTS}.auth", templates=False),
    KeyDoc(
        f"{_TENANTS}.records", "path", "", "Path of the tenant list in the body; `''` = the body."
    ),
    KeyDoc(
        f"{_TENANTS}.key",
        "path",
        None,
        "Path of the partition key in each record (a non-empty string).",
        required=True,
    ),
    KeyDoc(
        f"{_TENANTS}.data",
        "mapping",
        None,
        "Partition data: name -> path in the record. Omitted: the whole record.",
    ),
    *_paginate(f"{_TENANTS}.paginate"),
    KeyDoc("partitions.python", "string", None, "`module:attr` of a Python partitions callable."),
    KeyDoc("partitions.refresh", "duration", "5m", "How often the partition list is refreshed."),
    KeyDoc("request", "mapping", None, "The request of each page.", required=True),
    KeyDoc(
        "request.url",
        "template",
        None,
        "Absolute http(s) URL; required unless `base` and `path` are set instead.",
    ),
    KeyDoc(
        "request.base",
        "template",
        None,
        "Absolute http(s) URL that `path` is joined to (with one `/`); usually set once in "
        "a connector's `defaults`. Not together with `url`.",
    ),
    KeyDoc("request.path", "template", None, "Joined to `base`: the endpoint of this stream."),
    KeyDoc("request.method", "GET | POST", "GET", "HTTP method."),
    KeyDoc(
        "request.query",
        "mapping",
        None,
        "Query parameters (template values; one left out when it renders nothing).",
    ),
    KeyDoc(
        "request.headers",
        "mapping",
        None,
        "Request headers (template values; one left out when it renders nothing).",
    ),
    KeyDoc("request.body", "JSON", None, "JSON body for POST; template strings anywhere in it."),
    KeyDoc("request.timeout", "duration", "60s", "Timeout of each page's fetch."),
    *_auth("request.auth", templates=True),
    KeyDoc("records", "path", "", "Path of the item list in the body; `''` = the body."),
    KeyDoc("identity", "path", None, "Path of the item's identity.", required=True),
    KeyDoc(
        "version",
        "path",
        None,
        "Path of the item's version; without it, a fingerprint of the item.",
    ),
    *_paginate("paginate"),
    KeyDoc(
        "cursor",
        "mapping",
        None,
        "Kept between polls; exactly one of the keys below. Without it: `none`.",
        one_of=True,
    ),
    KeyDoc(
        "cursor.token",
        "mapping",
        None,
        "A token in the last page's body, sent on the next poll (the previous one is kept "
        "when the last page has none).",
    ),
    KeyDoc("cursor.token.path", "path", None, "Where the token is in the body.", required=True),
    KeyDoc(
        "cursor.token.param",
        "string",
        None,
        "Query parameter it is sent in (or use `{cursor}` in a template).",
    ),
    KeyDoc(
        "cursor.timestamp",
        "mapping",
        None,
        "The greatest item `field` seen, sent as ISO-8601 (UTC) on the next poll.",
    ),
    KeyDoc("cursor.timestamp.field", "path", None, "Path of the item's timestamp.", required=True),
    KeyDoc(
        "cursor.timestamp.param",
        "string",
        None,
        "Query parameter it is sent in (or use `{cursor}` in a template).",
    ),
    KeyDoc(
        "cursor.timestamp.lookback",
        "duration",
        "0s",
        "Sent this much earlier, to re-read late writes.",
    ),
    KeyDoc("cursor.none", "true", None, "Full listing each poll; the snapshot finds the changes."),
    KeyDoc(
        "on_status",
        "mapping",
        None,
        "Per status (`404`) or class (`4xx`): `ok`, `ignore`, `retry`, `rate-limited` or "
        "`fail`. Defaults: 2xx ok, 304 no change, 429 rate-limited, 5xx retry, other fail.",
    ),
    KeyDoc(
        "schedule",
        "mapping",
        None,
        "Polling interval bounds, adaptive in between: a poll that finds nothing lengthens the "
        "interval by a tenth of the range, one that finds a change halves it. The next poll is "
        "due one interval after this one was due (a fixed rate: how long a poll takes does not "
        "push the next one back). A poll that started over a second late (the runner was "
        "behind) comes back at the key's own point of the interval (fixed per key, like "
        "Jenkins' `H`), half to one and a half intervals later, so that many keys on one "
        "schedule are polled evenly rather than in waves.",
    ),
    KeyDoc("schedule.min", "duration", "30s", "Shortest interval."),
    KeyDoc("schedule.max", "duration", "15m", "Longest interval."),
    KeyDoc("budget", "string", None, "Name of a shared request budget (`budgets:`)."),
    KeyDoc("budget_weight", "number", 1, "Weight in a weighted budget."),
    KeyDoc(
        "max_pages",
        "int",
        100,
        "Pages per poll; the rest continues on the next poll, at once and without waiting "
        "for the pages' commits when no other key is waiting for its turn.",
    ),
    KeyDoc(
        "reconcile",
        "duration",
        None,
        "How often a full scan looks for deleted items; none without it.",
    ),
    KeyDoc("circuit", "mapping", None, "Circuit breaker per partition."),
    KeyDoc("circuit.failure_threshold", "int", 5, "Consecutive failures that open it."),
    KeyDoc("circuit.cooldown", "duration", "30s", "First wait before a probe."),
    KeyDoc("circuit.max_cooldown", "duration", "10m", "Longest wait."),
    KeyDoc("circuit.multiplier", "number", 2, "Growth of the wait after a failed probe."),
    KeyDoc("topic", "string", None, "Events topic; default `<prefix>.events.<name>`."),
    KeyDoc(
        "schema",
        "path or mapping",
        None,
        "Avro record of the items (`.avsc` relative to the config file, or inline).",
    ),
    KeyDoc("schema_version", "int", 1, "Stamped on each event."),
    KeyDoc(
        "retain",
        "duration",
        "30d",
        "How long deleted items are remembered; for a child stream, also how long a partition "
        "paused by its parent item or its tenant's removal is kept before it is deleted.",
    ),
    KeyDoc(
        "streams",
        "list",
        None,
        "Several endpoints of one vendor: a list of stream entries, each with a `name` "
        "(`[A-Za-z0-9_-]+`) and any key of a poller but `partitions`, compiled to a poller "
        "`<connector>.<stream>`. With it, the connector entry holds only `name`, `partitions`, "
        "`defaults` and `streams`.",
    ),
    KeyDoc(
        "defaults",
        "mapping",
        None,
        "With `streams`: any stream key, deep-merged into each stream (the stream's own "
        "value wins; a list is replaced, not merged).",
    ),
    KeyDoc(
        "publish",
        "bool",
        True,
        "A stream's events are published; `false`: the stream is polled only to drive its "
        "child streams. Only in a stream.",
    ),
    KeyDoc(
        "parent",
        "mapping",
        None,
        "A child stream: one partition per item of another stream of the connector, keyed "
        "`<parent partition>/<parent.key>`, created by the parent's commits. Only in a stream.",
    ),
    KeyDoc(
        "parent.stream",
        "string",
        None,
        "The parent stream (itself a child or not).",
        required=True,
    ),
    KeyDoc(
        "parent.key",
        "path",
        None,
        "Path in the parent's item: the child partition's last part and `{parent.key}`. An "
        "item without it is parked with the reason. When the parent sets `reconcile` or "
        "`transform.filter`, it must be the parent's `identity` path (a deletion they find "
        "carries only the identity).",
        required=True,
    ),
    KeyDoc(
        "parent.where",
        "mapping",
        None,
        "Filter on the parent's items, the form of `transform.filter`: an item leaving it "
        "pauses its child, one coming back resumes it.",
    ),
    *_transform("transform"),
)

STREAM_ONLY = ("publish", "parent")
"""Keys a stream entry may have and a poller on its own may not."""
CONNECTOR_ONLY = ("streams", "defaults")
"""Keys of a connector entry with streams, never of a stream."""

_BY_PATH: dict[str, KeyDoc] = {doc.path: doc for doc in DECLARATIVE_KEYS}


def key_doc(path: str) -> KeyDoc:
    return _BY_PATH[path]


def default_of(path: str) -> Any:
    return _BY_PATH[path].default


def children(path: str) -> tuple[str, ...]:
    """Names of the keys directly under ``path`` (``''``: the poller entry), in table order."""
    prefix = f"{path}." if path else ""
    out: list[str] = []
    for doc in DECLARATIVE_KEYS:
        if doc.path.startswith(prefix):
            rest = doc.path[len(prefix) :]
            if rest and "." not in rest:
                out.append(rest)
    return tuple(out)


def check_section(given: Mapping[str, Any], path: str, where: str) -> None:
    """Unknown keys under ``path`` are a ``ConfigError`` at ``where.<key>``; required ones
    missing are one at ``where.<key>``."""
    known = children(path)
    check_keys(given, known, where)
    for name in known:
        doc = _BY_PATH[f"{path}.{name}" if path else name]
        if doc.required and name not in given:
            raise ConfigError(f"is required: {doc.doc}", f"{where}.{name}")
