"""Errors the control seam raises, each mapped to one HTTP status by the REST layer.

``ConfigError`` (400, names the field) comes from :mod:`watukuy.core.errors`; the ones here
are about the request's target, not its content. ``Conflict`` (409) is core/errors.py's.
"""

from __future__ import annotations

from watukuy.core.errors import ConfigError, Conflict, WatukuyError


class NotFound(WatukuyError):
    """No such connector, partition or parked item: 404."""


class BadRequest(ConfigError):
    """The request itself is malformed (not JSON, a bad query parameter): 400, naming the
    field like any ``ConfigError``."""


__all__ = ["BadRequest", "Conflict", "NotFound"]
