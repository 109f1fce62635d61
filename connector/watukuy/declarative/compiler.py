"""``compile_poller``: a declarative poller entry (a ``pollers:`` mapping with ``name``) to the
same :class:`~watukuy.core.poller.Poller` that ``define_poller`` makes, run by the engine
unchanged.

Everything is checked here, once, at load: unknown keys (with "did you mean"), two of an
"exactly one of", templates (unknown names, ``{partition.data...}`` without partitions), paths,
durations (``"30s"``; a bare number is refused), ``on_status`` codes and actions. Each
``ConfigError`` names the path of the bad field under ``where`` (``pollers[2].paginate.page.size``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.events import canonical_json
from watukuy.core.keys import POLLER_NAME
from watukuy.core.poller import ParentSpec, Poller, StreamOf, define_poller
from watukuy.core.transforms import Transform, compile_transform
from watukuy.core.validation import positive_int
from watukuy.declarative import cursors
from watukuy.declarative.fanout import Fanout, parse_fanout
from watukuy.declarative.fetch import PollSpec, make_fetch
from watukuy.declarative.paging import check_body_places, parse_paginate
from watukuy.declarative.paths import Path as ItemPath
from watukuy.declarative.paths import parse_path
from watukuy.declarative.records import parse_records
from watukuy.declarative.request import RequestSpec, parse_request
from watukuy.declarative.shared import Shared
from watukuy.declarative.sources import parse_partitions
from watukuy.declarative.status import parse_on_status
from watukuy.declarative.templates import Template, compile_template
from watukuy.declarative.values import duration, section
from watukuy.declarative.webhooks import attach_webhook
from watukuy.http import Transport
from watukuy.options.declarative import CONNECTOR_ONLY, STREAM_ONLY, default_of
from watukuy.options.secrets import Written

__all__ = ["compile_poller", "compile_stream"]


def compile_poller(
    spec: Mapping[str, Any],
    *,
    where: str,
    base_dir: Path,
    transport: Transport | None = None,
    written: Mapping[str, Written] | None = None,
    parents: int = 0,
) -> Poller:
    """The poller ``spec`` describes; a ``ConfigError`` names the first bad field.

    ``where`` prefixes error paths (``pollers[2]``); ``base_dir`` is the config file's
    directory (``schema`` and ``partitions.file`` are relative to it); ``transport`` is used
    by an ``http`` partition source only (the polls go through the engine's ``ctx.http``);
    ``written`` holds, by config path, the strings that held ``${...}`` references (see
    :class:`~watukuy.options.secrets.Written`), so templates keep their values literal and
    show only the references; ``parents`` is a child stream's depth (what ``transform.set``
    may read of ``{parent.key}``, ``{parent.parent.key}``...).

    An entry with ``streams:`` is several pollers: see
    :func:`~watukuy.declarative.streams.compile_connector_entry`.
    """
    given = section(spec, "", where)
    for key in (*CONNECTOR_ONLY, *STREAM_ONLY):
        if key in given:
            raise ConfigError(_ONLY[key], f"{where}.{key}")
    written = written or {}
    partitions, refresh = _partitions(given.get("partitions"), where, base_dir, transport, written)
    poller = _compile(given, where, base_dir, written, (partitions, refresh), None, parents)
    return attach_webhook([poller], given, where)[0]


_ONLY = {
    "streams": "an entry with streams is several pollers: compile it with compile_connector_entry",
    "defaults": "only an entry with streams takes defaults (they are merged into each stream)",
    "publish": "only a stream of an entry with streams takes publish",
    "parent": "only a stream of an entry with streams takes parent",
}


def compile_stream(
    given: Mapping[str, Any],
    *,
    where: str,
    base_dir: Path,
    written: Mapping[str, Written],
    shared: Shared,
    stream_of: StreamOf,
    parents: int = 0,
    parent: ParentSpec | None = None,
) -> Poller:
    """One stream of a connector (its entry merged with ``defaults``, ``name`` the poller's
    ``<connector>.<stream>``): the connector's listing, token cache and pacing are ``shared``."""
    section(given, "", where)  # the keys a poller requires, whether written here or in defaults
    listing = None if shared.listing is None else shared.listing.for_stream(stream_of.stream)
    # A child stream's keys come from its parent's items, not from the tenants' listing.
    source = (listing, shared.refresh) if parent is None else (None, None)
    poller = _compile(given, where, base_dir, written, source, shared, parents)
    if parent is not None:
        poller = replace(poller, parent=parent)
    publish = given.get("publish")
    if publish is None:
        return replace(poller, stream_of=stream_of)
    if not isinstance(publish, bool):
        raise ConfigError(f"must be true or false, got {publish!r}", f"{where}.publish")
    return replace(poller, stream_of=stream_of, extra={**poller.extra, "publish": publish})
    return replace(poller, stream_of=stream_of)


def _compile(
    given: Mapping[str, Any],
    where: str,
    base_dir: Path,
    written: Mapping[str, Written],
    source: tuple[Callable[[], Any] | None, float | None],
    shared: Shared | None,
    parents: int,
) -> Poller:
    name = _name(given["name"], f"{where}.name")
    partitions, refresh = source
    fanout = _fanout(given.get("fanout"), f"{where}.fanout", partitions, parents)
    if fanout is not None and partitions is not None:
        partitions = fanout.listing(name, partitions)
    cursor = cursors.parse_cursor(given.get("cursor"), f"{where}.cursor")
    tenants = partitions is not None or (parents > 0 and shared is not None and shared.listing)
    names = () if fanout is None else fanout.names
    compile_value = _template_compiler(bool(tenants), cursor, written, parents, names)
    tokens = None if shared is None else shared.tokens
    connector = name if shared is None else shared.connector
    request = parse_request(
        given["request"], "request", f"{where}.request", compile_value, tokens, connector
    )
    used = {p.text[1:-1] for t in request.templates for p in t.placeholders}
    used &= {"cursor", "cursor.start", "cursor.end"}
    cursors.check_sent(cursor, used, f"{where}.cursor")
    cursor = cursor.bind(used, compile_value)
    check_body_places(cursor, request, f"{where}.request.method")
    schedule = _schedule(given.get("schedule"), f"{where}.schedule")
    poll = _poll_spec(given, where, request, cursor, throttle_default=schedule["min"])
    options: dict[str, Any] = {
        "name": name,
        "fetch": make_fetch(poll, None if shared is None else shared.pacing),
        **_item_getters(given, where),
        "partitions": partitions,
        "cursor": {"strategy": cursor.strategy, "initial": None},
        "schedule": schedule,
        "schema": _schema(given.get("schema"), f"{where}.schema", base_dir),
    }
    options["transform"] = _transform(given, where, options["schema"], written, parents)
    if refresh is not None:
        options["partitions_refresh"] = refresh
    if request.timeout is not None:
        options["fetch_timeout"] = request.timeout
    options.update(_tuning(given, where))
    defined = _define(options, where)
    return defined if fanout is None else replace(defined, fanout=fanout.names)


def _fanout(raw: object, where: str, tenants: object, parents: int) -> Fanout | None:
    fanout = parse_fanout(raw, where)
    if fanout is not None and parents:
        raise ConfigError("a child stream cannot fan out: its keys are its parent's items", where)
    if fanout is not None and tenants is None:
        raise ConfigError("fanout needs partitions: its keys are <tenant>/<value>", where)
    return fanout


def _name(raw: object, where: str) -> str:
    if not isinstance(raw, str) or POLLER_NAME.fullmatch(raw) is None:
        raise ConfigError(f"must match [A-Za-z0-9._-]+, got {raw!r}", where)
    return raw


def _partitions(
    raw: object,
    where: str,
    base_dir: Path,
    transport: Transport | None,
    written: Mapping[str, Written],
) -> tuple[Callable[[], Any] | None, float | None]:
    """The partition source and its refresh interval; ``(None, None)``: one partition."""
    if raw is None:
        return None, None
    return parse_partitions(
        raw, where=f"{where}.partitions", base_dir=base_dir, transport=transport, written=written
    )


def _template_compiler(
    partitioned: bool,
    cursor: cursors.Cursor,
    written: Mapping[str, Written],
    parents: int = 0,
    fanout: tuple[str, ...] = (),
) -> Callable[[object, str], Template]:
    """Compiles a template value at a config path, knowing which placeholders exist here."""
    has_cursor = not isinstance(cursor, cursors.NoCursor)
    window = isinstance(cursor, cursors.TimestampCursor)

    def compile_value(raw: object, at: str) -> Template:
        return compile_template(
            raw,
            at,
            partitioned=partitioned,
            cursor=has_cursor,
            window=window,
            written=written.get(at),
            parents=parents,
            fanout=fanout,
        )

    return compile_value


def _poll_spec(
    given: Mapping[str, Any],
    where: str,
    request: RequestSpec,
    cursor: cursors.Cursor,
    *,
    throttle_default: float,
) -> PollSpec:
    status = parse_on_status(given.get("on_status"), f"{where}.on_status")
    paginate = parse_paginate(given.get("paginate"), "paginate", f"{where}.paginate")
    check_body_places(paginate, request, f"{where}.request.method")
    return PollSpec(
        request=request,
        records=parse_records(given, where),
        paginate=paginate,
        paginate_where=f"{where}.paginate",
        cursor=cursor,
        status=status,
        throttle_default=throttle_default,
        passthrough=status.passthrough(),
    )


def _item_getters(given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``identity`` and ``version`` (``None``: a fingerprint) of an item, by path."""
    version = given.get("version")
    return {
        "identity": _identity(given["identity"], f"{where}.identity"),
        "version": None
        if version is None
        else _getter(parse_path(version, f"{where}.version"), "version"),
    }


def _tuning(given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The optional keys ``define_poller`` takes as they are, or as a count or a duration."""
    options: dict[str, Any] = {}
    for key in ("budget", "budget_weight", "topic", "schema_version"):
        if key in given:
            options[key] = given[key]
    if "max_pages" in given:
        options["max_pages"] = positive_int(given["max_pages"], f"{where}.max_pages")
    for key in ("retain", "reconcile"):
        if given.get(key) is not None:
            options[key] = duration(given[key], f"{where}.{key}")
    if given.get("circuit") is not None:
        options["circuit"] = _circuit(given["circuit"], f"{where}.circuit")
    return options


def _transform(
    given: Mapping[str, Any],
    where: str,
    schema: Any,
    written: Mapping[str, Written],
    parents: int,
) -> Transform | None:
    """The compiled ``transform``; an HMAC key must come from a ``${...}`` reference, so the
    config (and what REST shows of it) holds the reference, never the key."""
    if given.get("transform") is None:
        return None
    return compile_transform(
        given["transform"],
        f"{where}.transform",
        parents=parents,
        schema=schema,
        secret_at=lambda path: path in written,
    )


def _identity(raw: object, where: str) -> Callable[[Any], Any]:
    """One path, or several: then the identity is the compact JSON text of their values (a
    stable join that no two different lists of values share)."""
    if not isinstance(raw, list):
        return _getter(parse_path(raw, where), "identity")
    if len(raw) < 2:
        raise ConfigError("a list of identity paths needs two or more (else write one path)", where)
    paths = [parse_path(text, f"{where}[{index}]") for index, text in enumerate(raw)]

    def joined(item: Any) -> str:
        return canonical_json([path.get(item, "identity") for path in paths])

    joined.__qualname__ = joined.__name__ = "identity_at_" + "+".join(p.text for p in paths)
    return joined


def _getter(path: ItemPath, what: str) -> Callable[[Any], Any]:
    """identity / version of an item by path. Floats become text (the core takes str or int);
    a missing value raises, which parks the item ``invalid`` with a message naming the path."""

    def get(item: Any) -> Any:
        found = path.get(item, what)
        return repr(found) if isinstance(found, float) else found

    get.__qualname__ = get.__name__ = f"{what}_at_{path.text or 'body'}"
    return get


def _schedule(raw: object, where: str) -> dict[str, float]:
    given = {} if raw is None else section(raw, "schedule", where)
    low = duration(given.get("min", default_of("schedule.min")), f"{where}.min")
    longest = duration(default_of("schedule.max"), f"{where}.max")
    high = duration(given["max"], f"{where}.max") if "max" in given else max(low, longest)
    if low > high:
        raise ConfigError("min is greater than max", f"{where}.min")
    return {"min": low, "max": high}


def _circuit(raw: object, where: str) -> dict[str, Any]:
    given = section(raw, "circuit", where)
    out = dict(given)
    for key in ("cooldown", "max_cooldown"):
        if key in given:
            out[key] = duration(given[key], f"{where}.{key}")
    return out


def _schema(raw: object, where: str, base_dir: Path) -> Any:
    """Load it now (relative to the config file), so a bad schema fails at load naming the
    field; the poller carries the parsed JSON form."""
    if raw is None:
        return None
    from watukuy.serde.data import DataSchema  # fastavro only when a poller declares a schema

    if not isinstance(raw, str | Mapping):
        raise ConfigError("must be the path of an .avsc file or an Avro record mapping", where)
    return DataSchema.load(raw, where, base=base_dir).schema


def _define(options: dict[str, Any], where: str) -> Poller:
    """``define_poller``, its errors re-pathed from ``poller 'name'.x`` to ``where.x``."""
    try:
        return define_poller(**options)
    except ConfigError as exc:
        prefix = f"poller '{options['name']}'"
        path = exc.path or ""
        if path.startswith(prefix):
            path = where + path[len(prefix) :]
        elif path == "name":
            path = f"{where}.name"
        text = str(exc)
        message = text[len(f"{exc.path}: ") :] if exc.path else text
        raise ConfigError(message, path or where) from None
