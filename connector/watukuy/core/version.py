"""This release's version: at the bottom, so that the modules which report it (the CLI's
``--version``, REST's ``GET /`` and OpenAPI document) need not import the package's facade."""

__all__ = ["VERSION"]

VERSION = "0.1.0"
"""Kept equal to ``version`` in pyproject.toml."""
