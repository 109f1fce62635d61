"""Which form a connector config takes on the wire: Connect's flat form or the nested one.

The control seam always speaks the nested config (a declarative poller entry, or
``{"python": "module:attr"}``). Connect clients speak a flat map of strings
(:mod:`watukuy.options.flat`), so the routes convert at the edge: what comes in flat is
unflattened before the control sees it, and what goes out is flattened unless the caller asks
for ``?format=nested``.

A body is flat when it names ``connector.class``. A PATCH names only what it changes, so it is
also flat when a key is dotted or every value is a string or ``null`` (a nested patch of a
top-level string setting means the same in both forms).
"""

from __future__ import annotations

from collections.abc import Mapping

from watukuy.core.errors import ConfigError
from watukuy.core.validation import join, message_of
from watukuy.options.flat import CLASS_KEY, flatten, unflatten
from watukuy.rest.errors import BadRequest
from watukuy.rest.port import Config, JsonValue

__all__ = [
    "connector_class",
    "from_wire",
    "is_flat_patch",
    "nested_requested",
    "patched",
    "to_wire",
]

FORMATS = ("flat", "nested")


def nested_requested(query: Mapping[str, str]) -> bool:
    """``?format=nested`` (or ``flat``, the default); anything else is a 400 naming it."""
    given = query.get("format", "flat")
    if given not in FORMATS:
        raise BadRequest(f"must be one of: {', '.join(FORMATS)}", "format")
    return given == "nested"


def connector_class(config: Mapping[str, JsonValue]) -> str:
    """``python`` for a config naming a Poller object, else ``http`` (declarative)."""
    return "python" if "python" in config else "http"


def to_wire(name: str, config: Config, *, nested: bool) -> Config:
    """The config as a route returns it: Connect's flat form with its ``name``, as Connect's
    own configs carry it, or the nested config as stored."""
    if nested:
        return config
    flat = flatten(config, connector_class(config))
    return {CLASS_KEY: flat.pop(CLASS_KEY), "name": name, **flat}


def from_wire(config: Config, field: str) -> Config:
    """The nested config of a body's config; a flat one's errors name the flat key under
    ``field`` (``config.request.url``)."""
    if CLASS_KEY not in config:
        return config
    try:
        return unflatten(config)[1]
    except ConfigError as exc:
        raise ConfigError(message_of(exc), join(field, exc.path or CLASS_KEY)) from None


def is_flat_patch(patch: Mapping[str, JsonValue]) -> bool:
    return (
        CLASS_KEY in patch
        or any("." in key for key in patch)
        or all(value is None or isinstance(value, str) for value in patch.values())
    )


def patched(current: Config, patch: Mapping[str, JsonValue]) -> Config:
    """KIP-477's PATCH on the flat form of ``current``: ``null`` removes a key, anything else
    sets it. A key set or removed takes the keys below it along, so ``request.query`` given as
    JSON text replaces the whole map rather than merging into its old dotted entries."""
    flat: dict[str, JsonValue] = dict(flatten(current, connector_class(current)))
    for key, value in patch.items():
        below = f"{key}."
        for old in [name for name in flat if name == key or name.startswith(below)]:
            del flat[old]
        if value is not None:
            flat[key] = value
    if CLASS_KEY not in flat:
        raise ConfigError("cannot be removed: it says what kind of connector this is", CLASS_KEY)
    return from_wire(flat, "")
