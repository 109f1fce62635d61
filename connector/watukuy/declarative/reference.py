"""The declarative poller keys as a Markdown table, for the README's config reference."""

from __future__ import annotations

import json

from watukuy.declarative.keys import DECLARATIVE_KEYS, KeyDoc

__all__ = ["reference_markdown"]


def reference_markdown() -> str:
    """One row per key of :data:`~watukuy.declarative.keys.DECLARATIVE_KEYS`, in table order.

    Deterministic (the README embeds it and a test compares the two); ends with a newline.
    """
    lines = [
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    lines.extend(_row(doc) for doc in DECLARATIVE_KEYS)
    return "\n".join(lines) + "\n"


def _row(doc: KeyDoc) -> str:
    notes = [doc.doc]
    if doc.required:
        notes.insert(0, "**Required.**")
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
