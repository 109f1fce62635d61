"""The declarative poller keys as a Markdown table, for the config reference
(docs/configuration.md)."""

from __future__ import annotations

from watukuy.options.declarative import DECLARATIVE_KEYS
from watukuy.options.keydoc import markdown_table

__all__ = ["reference_markdown"]


def reference_markdown() -> str:
    """One row per key of :data:`~watukuy.options.declarative.DECLARATIVE_KEYS`, in table order.

    Deterministic (docs/configuration.md embeds it and a test compares the two); ends with a
    newline.
    """
    return markdown_table(DECLARATIVE_KEYS)
