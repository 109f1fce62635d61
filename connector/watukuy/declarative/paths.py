"""Paths into JSON bodies and items, for declarative pollers: the one grammar of
:mod:`watukuy.core.paths` (``data.items``, ``results[0].id``, ``meta["next.link"]``,
``list[*].customer``, ``''``), re-exported where the declarative modules read it."""

from __future__ import annotations

from watukuy.core.paths import EVERY, MISSING, Path, parse_path

__all__ = ["EVERY", "MISSING", "Path", "parse_path"]
