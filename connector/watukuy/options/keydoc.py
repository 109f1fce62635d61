"""A config key described once (:class:`KeyDoc`) and a table of them rendered as Markdown.

The runner config's table (:data:`watukuy.config.reference.RUNNER_KEYS`) and a declarative
poller's (:data:`watukuy.options.declarative.DECLARATIVE_KEYS`) are both made of these; the
parsers read their known keys from them and the config reference (docs/configuration.md) is
rendered from them, so the documentation cannot drift from what ``validate`` accepts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["KeyDoc", "markdown_table"]


@dataclass(frozen=True, slots=True)
class KeyDoc:
    """One config key, described once: the parsers read the known keys from tables of these,
    and the config reference (docs/configuration.md) is rendered from them.
    """

    path: str
    """Dotted path, e.g. ``runner.commit.interval`` or ``paginate.page.size``."""
    kind: str
    """What the value is: ``string``, ``template``, ``path``, ``duration``, ``mapping``..."""
    default: Any = None
    """The value when the key is absent (``None``: no default)."""
    doc: str = ""
    required: bool = False
    one_of: bool = False
    """A mapping of alternatives: exactly one child is set (but those marked ``beside``)."""
    beside: bool = False
    """A setting beside the alternatives of its ``one_of`` parent, not one of them
    (``paginate.stop``)."""
    secret: bool = False
    """A credential: ``validate`` and REST show it as ``[redacted]`` even when written inline."""


def markdown_table(table: Iterable[KeyDoc]) -> str:
    """One row per key, in table order; deterministic (docs/configuration.md embeds it)."""
    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    lines.extend(_row(doc) for doc in table)
    return "\n".join(lines) + "\n"


def _row(doc: KeyDoc) -> str:
    notes = ["**Required.**", doc.doc] if doc.required else [doc.doc]
    cells = [f"`{doc.path}`", _escape(doc.kind), _default(doc), _escape(" ".join(notes))]
    return "| " + " | ".join(cells) + " |"


def _default(doc: KeyDoc) -> str:
    if doc.default is None:
        return ""
    if isinstance(doc.default, str):
        return f"`{doc.default}`" if doc.default else "`''`"
    return f"`{json.dumps(doc.default)}`"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
