"""A declarative poller entry as ``validate`` (and REST) may show it.

``${...}`` references are redacted by the config loader, which knows which paths held them;
this hides what is sensitive even when written inline: the keys the key table marks
``secret`` (bearer tokens, passwords, API keys, client secrets), partition ``data`` of a
``static`` source (slugs and tokens are partition data), and header values whose name says
they carry a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watukuy.options.declarative import DECLARATIVE_KEYS
from watukuy.options.secrets import REDACTED

__all__ = ["shown"]

_SECRET_PATHS = frozenset(doc.path for doc in DECLARATIVE_KEYS if doc.secret)
_HEADER_SECTIONS = frozenset({"request.headers", "partitions.http.headers"})
_SENSITIVE_HEADER_WORDS = ("auth", "token", "key", "secret", "cookie", "session", "password")


def shown(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``entry`` with every sensitive value replaced by ``[redacted]``. ``defaults``
    and each of ``streams`` hold a poller's keys, so they are shown as entries themselves."""
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "defaults" and isinstance(value, Mapping):
            out[key] = shown(value)
        elif key == "streams" and isinstance(value, list):
            out[key] = [shown(s) if isinstance(s, Mapping) else s for s in value]
        else:
            out[key] = _walk(value, str(key))
    return out


def _walk(node: Any, path: str) -> Any:
    if path in _SECRET_PATHS:
        return REDACTED
    if path == "partitions.static" and isinstance(node, list):
        return [_static_entry(entry) for entry in node]
    if isinstance(node, Mapping):
        if path in _HEADER_SECTIONS:
            return {name: _header(str(name), value) for name, value in node.items()}
        return {key: _walk(value, f"{path}.{key}") for key, value in node.items()}
    if isinstance(node, list):
        return [_walk(value, path) for value in node]
    return node


def _static_entry(entry: Any) -> Any:
    if isinstance(entry, Mapping) and "data" in entry:
        return {**entry, "data": REDACTED}
    return entry


def _header(name: str, value: Any) -> Any:
    lowered = name.lower()
    return REDACTED if any(word in lowered for word in _SENSITIVE_HEADER_WORDS) else value
