"""Connect's config form: a connector's config as a flat map of string to string.

Connect clients (its REST entity classes, kcctl, Kafka UI, Terraform providers) read and write a
config as ``Map<String, String>``. :func:`flatten` turns a nested poller config into that form:
``connector.class`` plus one key per setting, a dotted path into the nested config
(``request.url``, ``schedule.min``, ``paginate.next_token.path``), each value a string. A subtree
a dotted path cannot name is ONE key whose value is that subtree's compact JSON text: a list
(``partitions.static``), a JSON value (``request.body``), an inline schema, and a free-form map
(``request.query``, ``on_status``) unless its keys are dot-free strings and its values strings.

:func:`unflatten` is the inverse, driven by the declarative key table
(:data:`~watukuy.options.declarative.DECLARATIVE_KEYS`): ``"100"`` for an ``int`` key is
``100``, ``"true"`` for a ``true`` key is ``True``, a JSON-text subtree is its value, and a
string key keeps ``"100"`` a string. Secrets are ``${...}`` placeholders, strings like any other,
so they pass through both ways untouched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.validation import check_keys, kind
from watukuy.options.declarative import DECLARATIVE_KEYS, children
from watukuy.options.webhookkeys import MAPPING_OR_NONE

__all__ = ["CLASSES", "CLASS_KEY", "flatten", "unflatten"]

CLASS_KEY = "connector.class"
"""The flat key naming the connector class (``http``: declarative, ``python``: a Poller)."""

CLASSES = ("http", "python")

_KINDS: dict[str, str] = {doc.path: doc.kind for doc in DECLARATIVE_KEYS}
_MAPPINGS = frozenset(path for path, what in _KINDS.items() if what in ("mapping", MAPPING_OR_NONE))
_STRUCTURED = frozenset(path for path in _MAPPINGS if children(path))
"""Mappings whose keys the table lists: each child is its own flat key."""
_FREE_FORM = _MAPPINGS - _STRUCTURED
"""Mappings of any keys (``request.query``, ``on_status``): dotted when the keys are dot-free and
the values strings, else one JSON key."""
_PYTHON_KINDS = {"python": "string", "name": "string"}
_JSON_KINDS = frozenset({"list", "JSON", "mapping"})


def flatten(nested: Mapping[str, Any], connector_class: str) -> dict[str, str]:
    """``nested`` in Connect's form: ``connector.class`` first, then one string per setting."""
    flat = {CLASS_KEY: connector_class}
    if connector_class == "http":
        flat.update(_flatten_section(nested, ""))
    else:
        flat.update((str(key), _as_text(value)) for key, value in nested.items())
    return flat


def unflatten(flat: Mapping[str, object]) -> tuple[str, dict[str, Any]]:
    """The connector class and the nested config of a flat one.

    Shorter keys apply first, so a dotted key refines a subtree given as JSON text
    (``request.query`` then ``request.query.limit``). An unknown key, or a value that does not
    parse as its key's type, is a ``ConfigError`` naming the flat key.
    """
    if CLASS_KEY not in flat:
        raise ConfigError(f"is required: one of {', '.join(CLASSES)}", CLASS_KEY)
    connector_class = next((name for name in CLASSES if name == flat[CLASS_KEY]), None)
    if connector_class is None:
        raise ConfigError(f"must be one of {', '.join(CLASSES)}", CLASS_KEY)
    kinds = _KINDS if connector_class == "http" else _PYTHON_KINDS
    settings = {key: value for key, value in flat.items() if key != CLASS_KEY}
    _check_known(settings, kinds)
    nested: dict[str, Any] = {}
    for key in sorted(settings, key=lambda name: name.count(".")):
        value = settings[key]
        what = kinds.get(key, "string")
        parsed = _parse(value, what, key) if isinstance(value, str) else copy.deepcopy(value)
        _put(nested, key, parsed)
    return connector_class, nested


# -- flatten ----------------------------------------------------------------------------------


def _flatten_section(given: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    for key, value in given.items():
        at = f"{path}.{key}" if path else str(key)
        if at in _STRUCTURED and _nameable(value):
            yield from _flatten_section(value, at)
        elif at in _FREE_FORM and _nameable(value) and _all_strings(value):
            yield from ((f"{at}.{name}", text) for name, text in value.items())
        elif _is_json(_KINDS.get(at), value):
            yield at, _json(value)
        else:
            yield at, _as_text(value)


def _is_json(what: str | None, value: object) -> bool:
    """Whether the key's value is written as JSON text: a list, JSON or a mapping, or an inline
    schema (a schema path stays a plain string)."""
    return (
        what in _JSON_KINDS
        or (what == "path or mapping" and isinstance(value, Mapping))
        or (what in ("path or list", "name or list") and isinstance(value, list))
    )


def _nameable(value: object) -> bool:
    """A non-empty mapping whose keys can each be one segment of a dotted path."""
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(key, str) and key and "." not in key for key in value)
    )


def _all_strings(value: Mapping[str, Any]) -> bool:
    return all(isinstance(item, str) for item in value.values())


def _as_text(value: object) -> str:
    """A string as it is; anything else as its compact JSON text."""
    return value if isinstance(value, str) else _json(value)


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- unflatten --------------------------------------------------------------------------------


def _check_known(settings: Mapping[str, object], kinds: Mapping[str, str]) -> None:
    """Reject the first key that names no setting, with "did you mean" (a key under a free-form
    map, ``request.headers.Accept``, names one of its entries)."""
    for key in settings:
        if not isinstance(key, str):
            raise ConfigError(f"keys must be strings, got {kind(key)}", str(key))
    unknown = {
        key: value
        for key, value in settings.items()
        if key not in kinds and not (kinds is _KINDS and _under_free_form(key))
    }
    check_keys(unknown, [CLASS_KEY, *kinds], "")


def _under_free_form(key: str) -> bool:
    parent, _, name = key.rpartition(".")
    return parent in _FREE_FORM and bool(name)


def _parse(text: str, what: str, key: str) -> Any:
    """``text`` as a value of kind ``what`` (a :class:`KeyDoc` kind)."""
    if what in ("path or mapping", MAPPING_OR_NONE):  # webhook.verify: none
        return _loads(text, key, "a JSON object", dict) if text.lstrip().startswith("{") else text
    if what == "path or list":
        return _loads(text, key, "a JSON array", list) if _json_list(text) else text
    if what == "name or list":  # a name never starts with '[' (budget names are keys)
        return _loads(text, key, "a JSON array", list) if text.lstrip()[:1] == "[" else text
    if what == "int":
        return _loads(text, key, "an integer", int)
    if what == "number":
        return _loads(text, key, "a number", int, float)
    if what in ("true", "bool"):
        return _loads(text, key, "true or false", bool)
    if what == "list":
        return _loads(text, key, "a JSON array", list)
    if what == "mapping":
        return _loads(text, key, "a JSON object", dict)
    if what == "JSON":
        return _loads(text, key, "JSON text", object)
    return text


def _json_list(text: str) -> bool:
    """Whether ``text`` is a list of identity paths (``["actor","created_at"]``) rather than
    one path written with a quoted first key (``["@odata.id"]``, which is JSON too): a list
    of paths has two or more, so one of a single string is the path."""
    stripped = text.lstrip()
    if not stripped.startswith("["):
        return False
    try:
        value = json.loads(stripped)
    except ValueError:
        return False
    return isinstance(value, list) and len(value) != 1


def _loads(text: str, key: str, expected: str, *types: type) -> Any:
    """``text`` as JSON of one of ``types`` (or null, which the parser judges later)."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ConfigError(f"must be {expected}, got {text!r}", key) from None
    if value is None:
        return None
    wrong_bool = isinstance(value, bool) and bool not in types and object not in types
    if wrong_bool or not isinstance(value, types):
        raise ConfigError(f"must be {expected}, got {text!r}", key)
    return value


def _put(nested: dict[str, Any], key: str, value: Any) -> None:
    """Set ``value`` at dotted ``key``, making the maps on the way (a JSON subtree set by a
    shorter key is refined by the longer ones, which come after it)."""
    *parents, last = key.split(".")
    here = nested
    for depth, name in enumerate(parents):
        below = here.get(name)
        if below is None:
            below = here[name] = {}
        elif not isinstance(below, dict):
            at = ".".join(parents[: depth + 1])
            raise ConfigError(f"is {kind(below)}, so {key!r} cannot be set under it", at)
        here = below
    here[last] = value
