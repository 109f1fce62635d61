"""Checks of what a request carries (path names, query parameters, JSON bodies), pure.

Each failure is a ``BadRequest`` naming the field (``config``, ``offsets[0].partition.key``).
The arguments of a key operation (``from``, ``ids``) are checked by the operation itself
(:meth:`watukuy.core.operations.KeyOperation.decode`, a ``ConfigError`` naming the argument),
so a REST body means exactly what a command record or an engine call does. User input is never
echoed in a message: it may be a secret pasted in the wrong place.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

from watukuy.core.errors import ConfigError
from watukuy.core.keys import POLLER_NAME
from watukuy.core.lifecycle import Target
from watukuy.core.operations import KEY_OPERATIONS, LANES, KeyOperation
from watukuy.core.validation import check_keys, join, json_kind, message_of
from watukuy.rest.errors import BadRequest
from watukuy.rest.port import (
    PARKED_KINDS,
    Config,
    JsonValue,
    KeyOffsets,
    ParkedKind,
)

KEY_PATTERN = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*")
"""A partition key REST can address (in a path, a query or a body): a child stream's key is
its parent's and the parent item's, joined by ``/`` (``acme/P1``), written ``%2F`` in a path
(aiohttp decodes it into the path's parameter)."""
UNPARTITIONED = "~"
"""How a path or query addresses the key ``''`` of an unpartitioned connector: ``~`` is
unreserved in URLs (nothing encodes or merges it, unlike an empty segment) and is not a
character of any key, so it names nothing else."""


def check_name(value: str, field: str = "name") -> str:
    if not POLLER_NAME.fullmatch(value):
        raise BadRequest("must match [A-Za-z0-9._-]+", field)
    return value


def check_key(value: str, field: str = "key") -> str:
    """A partition key from a path or query: ``~`` is the key ``''``."""
    if value == UNPARTITIONED:
        return ""
    if not KEY_PATTERN.fullmatch(value):
        raise BadRequest(
            f"must match [A-Za-z0-9._-]+ (a child key's parts joined by '/', written %2F in a "
            f"path), or be {UNPARTITIONED} for an unpartitioned connector",
            field,
        )
    return value


def parse_json(raw: bytes) -> JsonValue:
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadRequest("is not valid JSON (UTF-8)", "body") from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def flag(query: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter: ``true`` or ``false`` (any case); absent is false."""
    value = query.get(name)
    if value is None:
        return False
    lowered = value.lower()
    if lowered not in {"true", "false"}:
        raise BadRequest("must be true or false", name)
    return lowered == "true"


def expansions(values: list[str]) -> list[str]:
    """``?expand=status&expand=info``: each given once, in the order given. Connect ignores an
    unknown one; here it is named, so a typo is not silently a plain list."""
    out: list[str] = []
    for value in values:
        if value not in {"status", "info"}:
            raise BadRequest("must be status or info", "expand")
        if value not in out:
            out.append(value)
    return out


def parked_kind(query: Mapping[str, str]) -> ParkedKind | None:
    value = query.get("kind")
    if value is None:
        return None
    if value not in PARKED_KINDS:
        raise BadRequest(f"must be one of: {', '.join(PARKED_KINDS)}", "kind")
    return value


def optional_key(query: Mapping[str, str], name: str) -> str | None:
    """An optional partition filter: absent is every key; ``~`` or empty is the key ``''``."""
    value = query.get(name)
    if value is None:
        return None
    return "" if value == "" else check_key(value, name)


def mapping(value: JsonValue, field: str) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise BadRequest(f"must be a JSON object, got {json_kind(value)}", field)
    return value


def config_to_validate(value: JsonValue) -> dict[str, JsonValue]:
    """The body of ``PUT .../config/validate``: a JSON object, or a JSON string holding one.
    kafka-connect-py 1.0.0 (``kc validate-config``) JSON-encodes the file's text a second
    time, so the config arrives as a string; unwrapping it once lets that client validate."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        value = parse_json(value.encode("utf-8"))
    return mapping(value, "body")


def known_keys(body: Mapping[str, JsonValue], known: tuple[str, ...], field: str = "") -> None:
    """Refuse the first field not in ``known``, suggesting the closest known one."""
    try:
        check_keys(body, known, field, noun="field")
    except ConfigError as exc:
        raise BadRequest(message_of(exc), exc.path) from None


def finite(value: JsonValue, field: str) -> None:
    """Refuse a number JSON can write but a float cannot hold (``1e999`` reads as ``inf``):
    stored in a config, it has no JSON form, and every answer showing it would fail."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BadRequest("must be a finite number", field or "body")
    if isinstance(value, dict):
        for key, item in value.items():
            finite(item, join(field, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            finite(item, f"{field}[{index}]")


def connector_config(value: JsonValue, name: str, field: str = "") -> Config:
    """A config body (or the ``config`` of a create). A ``name`` in it, as Connect allows, must
    be the connector's own and is dropped: the name is the URL's."""
    config = mapping(value, field or "body")
    finite(config, field)
    given = config.get("name")
    if given is not None and given != name:
        raise BadRequest("does not match the connector name", join(field, "name"))
    return {key: item for key, item in config.items() if key != "name"}


def create_request(body: JsonValue) -> tuple[str, Config, Target]:
    """``POST /connectors``: ``{"name", "config", "initial_state"?}`` (KIP-980)."""
    given = mapping(body, "body")
    known_keys(given, ("name", "config", "initial_state"))
    name = given.get("name")
    if not isinstance(name, str):
        raise BadRequest(f"is required: a string, got {json_kind(name)}", "name")
    check_name(name)
    if "config" not in given:
        raise BadRequest("is required: the connector's config", "config")
    config = connector_config(given["config"], name, "config")
    state = given.get("initial_state", Target.RUNNING.value)
    names = [target.value for target in Target]
    if not isinstance(state, str) or state not in names:  # exactly a name: case counts
        raise BadRequest(f"must be one of: {', '.join(names)}", "initial_state")
    return name, config, Target(state)


def config_patch(body: JsonValue, name: str) -> Config:
    patch = mapping(body, "body")
    finite(patch, "")
    if "name" in patch and patch["name"] not in (None, name):
        raise BadRequest("does not match the connector name", "name")
    return {key: value for key, value in patch.items() if key != "name"}


def offsets_request(body: JsonValue) -> list[KeyOffsets]:
    """``PATCH .../offsets``: ``{"offsets": [{"partition": {"key"}, "offset": {...} | null}]}``."""
    given = mapping(body, "body")
    known_keys(given, ("offsets",))
    entries = given.get("offsets")
    if not isinstance(entries, list) or not entries:
        raise BadRequest(f"must be a non-empty list, got {json_kind(entries)}", "offsets")
    out: list[KeyOffsets] = []
    for index, entry in enumerate(entries):
        where = f"offsets[{index}]"
        item = mapping(entry, where)
        known_keys(item, ("partition", "offset"), where)
        partition = mapping(item.get("partition"), f"{where}.partition")
        known_keys(partition, ("key",), f"{where}.partition")
        key = partition.get("key")
        if not isinstance(key, str):
            raise BadRequest(f"must be a string, got {json_kind(key)}", f"{where}.partition.key")
        if key != "":
            check_key(key, f"{where}.partition.key")
        if "offset" not in item:
            raise BadRequest("is required: the lanes' cursors, or null to reset", f"{where}.offset")
        offset = item["offset"]
        if offset is not None:
            offset = mapping(offset, f"{where}.offset")
            known_keys(offset, LANES, f"{where}.offset")
        out.append({"partition": {"key": key}, "offset": offset})
    return out


def operation_args(op: KeyOperation, body: JsonValue) -> dict[str, JsonValue]:
    """The body of a key operation's route (``None``: none) as :meth:`Control.operate` takes
    it: checked by the registry's :meth:`KeyOperation.decode`, which names the bad argument
    (``from``, ``ids[1]``) and refuses unknown ones, and complete in its JSON form (absent
    arguments take their default)."""
    given = {} if body is None else mapping(body, "body")
    return op.encode(op.decode(given))


def retry_request(body: JsonValue) -> tuple[str, dict[str, JsonValue]]:
    """``POST .../parked/retry``: ``{"partition", "ids"}``; the key, and the arguments of the
    registry's ``retry`` (the partition is this route's way to name the key)."""
    op = KEY_OPERATIONS["retry"]
    given = mapping(body, "body")
    known_keys(given, ("partition", *(argument.name for argument in op.arguments)))
    key = given.get("partition")
    if not isinstance(key, str):
        raise BadRequest(f"is required: a string, got {json_kind(key)}", "partition")
    if key != "":  # a body can say '' itself; '~' is only for paths and queries
        check_key(key, "partition")
    args = operation_args(op, {name: value for name, value in given.items() if name != "partition"})
    return key, args


def handed_grant(body: JsonValue) -> str:
    """``PUT .../partitions/{key}/credentials``: ``{"refresh_token"}``, the grant a tenant
    authorised anew. Its value is never repeated in an error."""
    given = mapping(body, "body")
    known_keys(given, ("refresh_token",))
    token = given.get("refresh_token")
    if not isinstance(token, str) or not token.strip() or len(token) > MAX_GRANT:
        raise BadRequest(
            f"is required: a non-empty string of at most {MAX_GRANT} characters", "refresh_token"
        )
    return token


MAX_GRANT = 8192
"""Refresh tokens are opaque strings of tens to a few hundred characters (JWTs a few thousand)."""


def task_id(raw: str) -> int:
    """A task's id in a path: the partition's index in key order, a non-negative integer."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise BadRequest(
            "must be a task id: a non-negative integer (the partition's index in key order)",
            "id",
        )
    return int(raw)
