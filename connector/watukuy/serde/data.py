"""A poller's Avro schema for its items: loading it, and saying why an item does not conform.

With a data schema the event's ``data`` is that record; an item that does not conform is parked
``invalid`` with the one-line message of :meth:`DataSchema.validate`. Fields of the item the
schema does not declare are left out of the event (the schema is a projection), as Avro writers
do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.validation import validate as avro_validate

from watukuy.core.errors import ConfigError, WatukuyError
from watukuy.serde import binary

# Named types of the event envelope: a data schema must not redefine them.
ENVELOPE_NAMES = frozenset({"watukuy.Event", "watukuy.EventType", "watukuy.Lane"})

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMED = ("record", "error", "enum", "fixed")
_MISSING = object()


class InvalidData(WatukuyError, ValueError):
    """An item does not conform to its poller's data schema: park it ``invalid``."""


@dataclass(frozen=True, eq=False)
class DataSchema:
    """A poller's item schema: an Avro record, parsed once."""

    schema: dict[str, Any]  # the JSON form embedded in the envelope (namespace made explicit)
    parsed: Any
    name: str  # the record's full name
    # True only of items fastavro accepts (flat records): validating those skips fastavro.
    _surely_valid: Callable[[Any], bool] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_surely_valid", binary.record_check(self.parsed))

    @classmethod
    def load(
        cls, schema: Mapping[str, Any] | str | Path, path: str, *, base: Path | None = None
    ) -> DataSchema:
        """Parse ``schema`` (a dict, or the path of an ``.avsc`` file, relative to ``base``).

        Anything wrong raises :class:`ConfigError` naming ``path`` (``pollers[0].schema``).
        """
        given = _read(schema, path, base) if isinstance(schema, str | Path) else schema
        if not isinstance(given, Mapping) or given.get("type") not in ("record", "error"):
            raise ConfigError("must be an Avro record schema ({'type': 'record', ...})", path)
        try:
            tree: dict[str, Any] = json.loads(json.dumps(given))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"the schema is not JSON: {exc}", path) from None
        _check_names(tree, path)
        if "namespace" not in tree and "." not in str(tree.get("name", "")):
            # Embedded in watukuy.Event it would inherit "watukuy": keep its name as declared.
            tree["namespace"] = ""
        try:
            parsed: Any = parse_schema(tree)
        except Exception as exc:  # fastavro raises several types for a bad schema
            raise ConfigError(f"not a valid Avro schema: {_parse_error(exc)}", path) from None
        clash = sorted(ENVELOPE_NAMES & set(parsed.get("__named_schemas", {})))
        if clash:
            raise ConfigError(f"type name {clash[0]!r} is reserved for the event envelope", path)
        return cls(tree, parsed, str(parsed["name"]))

    def validate(self, item: Any) -> str | None:
        """``None`` when ``item`` conforms, else one line naming the offending field."""
        surely_valid = self._surely_valid
        if surely_valid is not None and surely_valid(item):
            return None
        if avro_validate(item, self.parsed, raise_errors=False):
            return None
        named = self.parsed.get("__named_schemas", {})
        return _explain(item, self.parsed, "", named) or f"does not conform to {self.name}"


def _read(file: str | Path, path: str, base: Path | None) -> Any:
    where = Path(file)
    if base is not None and not where.is_absolute():
        where = base / where
    try:
        return json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"schema file {str(where)!r} does not exist", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read schema file {str(where)!r}: {exc}", path) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"schema file {str(where)!r} is not JSON: {exc}", path) from None


def _parse_error(exc: Exception) -> str:
    text = str(exc)
    return f"unknown type {text!r}" if type(exc).__name__ == "UnknownType" else text


def _check_names(schema: Any, path: str) -> None:
    """Names Java and other Avro implementations accept (fastavro is lenient here)."""
    if isinstance(schema, list):
        for branch in schema:
            _check_names(branch, path)
        return
    if not isinstance(schema, Mapping):
        return
    kind = schema.get("type")
    if kind in _NAMED:
        name = schema.get("name")
        if not isinstance(name, str) or not all(_NAME.fullmatch(p) for p in name.split(".")):
            raise ConfigError(f"invalid {kind} name {name!r}", path)
    if kind in ("record", "error"):
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise ConfigError(f"record {schema.get('name')!r} needs a list of fields", path)
        for field in fields:
            name = field.get("name") if isinstance(field, Mapping) else None
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ConfigError(f"invalid field name {name!r} in {schema.get('name')!r}", path)
            _check_names(field.get("type"), path)
    elif kind == "array":
        _check_names(schema.get("items"), path)
    elif kind == "map":
        _check_names(schema.get("values"), path)
    elif isinstance(kind, list | Mapping):
        _check_names(kind, path)


# -- explaining a mismatch -------------------------------------------------------------------
# fastavro decides whether an item conforms; this walk only finds the first place it does not,
# by field path (``lines[2].amount``), since fastavro's own errors name types, not paths.


def _explain(datum: Any, schema: Any, where: str, named: Mapping[str, Any]) -> str | None:
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        return _explain_union(datum, schema, where, named)
    kind = schema.get("type") if isinstance(schema, Mapping) else schema
    if kind in ("record", "error"):
        if not isinstance(datum, Mapping):
            return _mismatch(where, schema, datum)
        for field in schema["fields"]:
            at = f"{where}.{field['name']}" if where else str(field["name"])
            value = datum.get(field["name"], field.get("default", _MISSING))
            if value is _MISSING:
                if _explain(None, field["type"], at, named) is None:
                    continue  # a nullable field without default: written as null
                return f"field '{at}': missing, expected {_type_name(field['type'])}"
            problem = _explain(value, field["type"], at, named)
            if problem is not None:
                return problem
        return None
    if kind == "array":
        if not isinstance(datum, list | tuple):
            return _mismatch(where, schema, datum)
        for index, value in enumerate(datum):
            problem = _explain(value, schema["items"], f"{where}[{index}]", named)
            if problem is not None:
                return problem
        return None
    if kind == "map":
        if not isinstance(datum, Mapping) or not all(isinstance(k, str) for k in datum):
            return _mismatch(where, schema, datum)
        for key, value in datum.items():
            problem = _explain(value, schema["values"], f"{where}[{key!r}]", named)
            if problem is not None:
                return problem
        return None
    # enum, fixed, a primitive, a logical type: nothing named inside, fastavro says.
    return (
        None
        if avro_validate(datum, schema, raise_errors=False)
        else _mismatch(where, schema, datum)
    )


def _explain_union(
    datum: Any, branches: list[Any], where: str, named: Mapping[str, Any]
) -> str | None:
    if any(_explain(datum, branch, where, named) is None for branch in branches):
        return None
    shaped = [
        b for b in branches if _shape(named.get(b, b) if isinstance(b, str) else b) == _shape(datum)
    ]
    if len(shaped) == 1 and _shape(datum) is not None:
        return _explain(datum, shaped[0], where, named)  # the branch the item meant
    return _mismatch(where, branches, datum)


def _shape(value: Any) -> str | None:
    """ "object" or "array", for a value or a schema."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind in ("record", "error", "map"):
            return "object"
        if kind == "array":
            return "array"
        return None if "type" in value else "object"
    if isinstance(value, list | tuple):
        return "array"
    return None


def _mismatch(where: str, schema: Any, datum: Any) -> str:
    subject = f"field '{where}'" if where else "item"
    return f"{subject}: expected {_type_name(schema)}, got {_show(datum)}"


def _type_name(schema: Any) -> str:
    if isinstance(schema, list):
        return " or ".join(_type_name(branch) for branch in schema)
    if not isinstance(schema, Mapping):
        return str(schema)
    kind = schema.get("type")
    if kind in ("record", "error"):
        return f"record {schema.get('name')}"
    if kind == "enum":
        symbols = list(schema.get("symbols", []))
        shown = ", ".join(symbols[:8]) + (", ..." if len(symbols) > 8 else "")
        return f"one of {shown}"
    if kind == "array":
        return f"array of {_type_name(schema.get('items'))}"
    if kind == "map":
        return f"map of {_type_name(schema.get('values'))}"
    if kind == "fixed":
        return f"fixed({schema.get('size')})"
    if "logicalType" in schema:
        return f"{kind} ({schema['logicalType']})"
    return _type_name(kind)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
