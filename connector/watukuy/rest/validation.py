"""Connect's answer to ``PUT /connector-plugins/{class}/config/validate`` (``ConfigInfos``).

Consoles (Kafka UI, Confluent Control Center, kcctl) draw a connector form from it: one entry
per setting, each with a ``definition`` (type, default, importance, documentation, group) and
a ``value`` (what was given, the choices, the errors). The definitions come from the key table
the parsers and the config reference read (:data:`~watukuy.options.declarative.DECLARATIVE_KEYS`),
so the form cannot offer a setting the parser refuses, nor miss one it accepts.

Names are the flat form's keys (:mod:`watukuy.options.flat`): ``paginate.page.size``, not
``paginate``. A secret's value is shown as ``[redacted]`` even when written inline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, TypedDict

from watukuy.core.errors import ConfigError
from watukuy.core.validation import message_of
from watukuy.options.declarative import DECLARATIVE_KEYS, children
from watukuy.options.flat import CLASS_KEY, CLASSES
from watukuy.options.keydoc import KeyDoc
from watukuy.rest.port import JsonValue

__all__ = ["ValidationReport", "validation_report"]

REDACTED = "[redacted]"

# Connect's ConfigDef types, by KeyDoc kind; a kind not listed is a STRING.
_TYPES = {"int": "INT", "number": "DOUBLE", "true": "BOOLEAN", "bool": "BOOLEAN", "list": "LIST"}


class KeyDefinition(TypedDict):
    name: str
    type: str
    required: bool
    default_value: str | None
    importance: str
    documentation: str
    group: str
    order_in_group: int
    width: str
    display_name: str
    dependents: list[str]


class KeyValue(TypedDict):
    name: str
    value: str | None
    recommended_values: list[str]
    errors: list[str]
    visible: bool


class ConfigReport(TypedDict):
    definition: KeyDefinition
    value: KeyValue


class ValidationReport(TypedDict):
    name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigReport]


_CLASS_DOC = KeyDoc(CLASS_KEY, " | ".join(CLASSES), None, "The connector class.", required=True)
_NAME_DOC = KeyDoc("name", "string", None, "The connector's name (the URL's).")
_PYTHON_DOC = KeyDoc(
    "python", "string", None, "`module:attr` naming a Poller made by `define_poller`.", True
)


def _settings(plugin: str) -> list[KeyDoc]:
    """Every flat key of ``plugin``'s configs: the table's keys but the mappings whose
    children it lists (those are named by their children)."""
    if plugin == "python":
        return [_CLASS_DOC, _NAME_DOC, _PYTHON_DOC]
    leaves = [doc for doc in DECLARATIVE_KEYS if not (doc.kind == "mapping" and children(doc.path))]
    return [_CLASS_DOC, _NAME_DOC, *leaves]


def validation_report(
    plugin: str, given: Mapping[str, JsonValue], error: ConfigError | None
) -> ValidationReport:
    """The report for the flat config ``given``; ``error`` (the compiler stops at the first)
    lands on the given key that its path falls under, or on the path itself."""
    docs = _settings(plugin)
    known = {doc.path for doc in docs}
    extra = [KeyDoc(key, "string", None, "Not a setting of this class.") for key in given]
    docs += [doc for doc in extra if doc.path not in known]
    errors: dict[str, list[str]] = {}
    if error is not None:
        where = _key_of(error.path or CLASS_KEY, [doc.path for doc in docs])
        if where not in {doc.path for doc in docs}:
            docs.append(KeyDoc(where, "string", None, "Named by the error."))
        errors[where] = [message_of(error)]
    configs = [_entry(doc, order, given, errors.get(doc.path, [])) for doc, order in _ordered(docs)]
    return {
        "name": plugin,
        "error_count": sum(len(found) for found in errors.values()),
        "groups": list(dict.fromkeys(_group(doc) for doc in docs)),
        "configs": configs,
    }


def _key_of(path: str, keys: list[str]) -> str:
    """The longest key that ``path`` (``partitions.static[0].key``) lies under, else ``path``."""
    under = [key for key in keys if path == key or path.startswith((f"{key}.", f"{key}["))]
    return max(under, key=len) if under else path


def _ordered(docs: list[KeyDoc]) -> Iterator[tuple[KeyDoc, int]]:
    seen: dict[str, int] = {}
    for doc in docs:
        group = _group(doc)
        seen[group] = seen.get(group, 0) + 1
        yield doc, seen[group]


def _group(doc: KeyDoc) -> str:
    """The top-level section a key sits in; the top-level scalars form ``Common``."""
    head, dot, _ = doc.path.partition(".")
    return head if dot and doc.path != CLASS_KEY else "Common"


def _entry(
    doc: KeyDoc, order: int, given: Mapping[str, JsonValue], errors: list[str]
) -> ConfigReport:
    definition: KeyDefinition = {
        "name": doc.path,
        "type": "PASSWORD" if doc.secret else _TYPES.get(doc.kind, "STRING"),
        "required": doc.required,
        "default_value": None if doc.default is None else _text(doc.default),
        "importance": "HIGH" if doc.required else "MEDIUM",
        "documentation": doc.doc,
        "group": _group(doc),
        "order_in_group": order,
        "width": "NONE",
        "display_name": doc.path,
        "dependents": [],
    }
    value: str | None = None
    if doc.path in given and given[doc.path] is not None:
        value = REDACTED if doc.secret else _text(given[doc.path])
    elif doc.default is not None:
        value = _text(doc.default)
    return {
        "definition": definition,
        "value": {
            "name": doc.path,
            "value": value,
            "recommended_values": _choices(doc),
            "errors": errors,
            "visible": True,
        },
    }


def _choices(doc: KeyDoc) -> list[str]:
    """``basic | body`` and ``GET | POST`` kinds list their choices; booleans theirs."""
    if doc.kind in ("true", "bool"):
        return ["true", "false"]
    if " | " in doc.kind:
        return doc.kind.split(" | ")
    return []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
