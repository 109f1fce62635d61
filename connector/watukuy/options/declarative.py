"""Every key of a declarative poller, as data: the parser's known keys, defaults and the config
config reference (:func:`watukuy.declarative.reference.reference_markdown`) all come from here.
It lives below both ``config`` (which renders and redacts with it) and ``declarative`` (which
parses with it), so neither has to reach into the other for it.

A :class:`KeyDoc` per key, by dotted path from the poller entry (``paginate.page.size``). A
mapping whose children are listed here accepts only those keys (an unknown one is a
``ConfigError`` with "did you mean"); a mapping without listed children is free-form
(``query``, ``headers``, ``on_status``). ``one_of`` marks a mapping of alternatives: exactly
one of its children must be set. ``auth`` and ``paginate`` appear twice, under ``request`` and
under ``partitions.http``: both are generated from one description. The keys of the kinds
(``auth``, ``paginate``, ``cursor``) are in :mod:`.kindkeys`, those of ``transform`` in
:mod:`.transformkeys`, those of ``webhook`` in :mod:`.webhookkeys`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.validation import check_keys
from watukuy.options.keydoc import KeyDoc
from watukuy.options.kindkeys import auth_keys, cursor_keys, paginate_keys
from watukuy.options.transformkeys import transform_keys
from watukuy.options.webhookkeys import webhook_keys

__all__ = [
    "CONNECTOR_ONLY",
    "DECLARATIVE_KEYS",
    "ENTRY_ONLY",
    "STREAM_ONLY",
    "check_section",
    "children",
    "default_of",
    "key_doc",
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
    *auth_keys(f"{_TENANTS}.auth", templates=False),
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
    *paginate_keys(f"{_TENANTS}.paginate"),
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
    KeyDoc(
        "request.timeout",
        "duration",
        "60s",
        "Timeout of each page's fetch, waits for a budget's token included (a fetch that "
        "runs out of time waiting for one is `rate_limited`, not a `timeout` of the vendor's).",
    ),
    *auth_keys("request.auth", templates=True),
    KeyDoc(
        "records",
        "path",
        "",
        "Path of the item list in the body; `''` = the body. `[*]` maps over a list: "
        "`list[*].customer` makes each element's `customer` an item (an element without it "
        "is parked `invalid`, saying so). Not with `record`.",
    ),
    KeyDoc(
        "record",
        "path",
        None,
        "Instead of `records`, for an answer that is one object (`/users/me`, a detail "
        "endpoint): the object at this path is the page's one item (`''` = the body; null "
        "or absent: none).",
    ),
    KeyDoc(
        "fanout",
        "list",
        None,
        "One partition per value: a list of `{name, values}`, `values` a list or "
        '`"{partition.data.NAME}"` (a list in each tenant\'s data); several entries give '
        "their product. Keys `<tenant>/<v1>/<v2>`, `{fanout.NAME}` in templates. A value "
        "that leaves the list pauses its partition and deletes it after `retain`, as a child "
        "partition is. Needs `partitions`; not in a child stream.",
    ),
    KeyDoc(
        "identity",
        "path or list",
        None,
        "Path of the item's identity; a list of paths for items identified by several "
        "fields (`[actor, created_at]`: one identity, the JSON text of their values).",
        required=True,
    ),
    KeyDoc(
        "version",
        "path",
        None,
        "Path of the item's version; without it, a fingerprint of the item.",
    ),
    *paginate_keys("paginate"),
    *cursor_keys("cursor"),
    KeyDoc(
        "on_status",
        "mapping",
        None,
        "Per status (`404`) or class (`4xx`): `ok`, `ignore`, `retry`, `rate-limited`, "
        "`fail` or `restart` (the page dropped, the listing again from its first page), or "
        "a list of rules read in order on the JSON body, `{when: FILTER, do: ACTION}` (the "
        "form of `transform.filter`) or a bare action for the rest: "
        "`400: [{when: {path: message, matches: '.*not enabled.*'}, do: ignore}, fail]`. "
        "Defaults: 2xx ok, 304 no change, 429 rate-limited, 5xx retry, other fail.",
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
    KeyDoc(
        "budget",
        "name or list",
        None,
        "Name of a shared request budget (`budgets:`), or a list of them "
        "(`[vendor, reports]`): each request then waits for a token of every one, the "
        "scarcest first.",
    ),
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
    KeyDoc(
        "parent.poll",
        "string",
        "schedule",
        "When a child partition is polled: `schedule`, on its own timer (the `schedule` key) "
        "like any partition; `on_change`, once when its parent item creates it and again "
        "each time that item is `updated`, never on a timer (an idle child costs stored state "
        "only). A failed poll is retried with backoff, then the child waits again.",
    ),
    *transform_keys("transform"),
    *webhook_keys("webhook"),
)

STREAM_ONLY = ("publish", "parent")
"""Keys a stream entry may have and a poller on its own may not."""
CONNECTOR_ONLY = ("streams", "defaults")
"""Keys of a connector entry with streams, never of a stream."""
ENTRY_ONLY = ("webhook",)
"""Keys of a connector entry (with streams or not) or of one stream, never of ``defaults``."""

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
