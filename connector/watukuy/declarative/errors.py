"""What a declarative poll can fail with, named by what the engine should do about it.

Every message names config (the method, the URL *template* without its query, a path, a
field) and never a rendered request: rendered URLs, headers and bodies carry partition data
(slugs, tenant hosts, tokens), and these messages end up in ``last_error``, logs and REST
answers. A ``retry`` status raises :class:`watukuy.http.VendorError` and a ``rate-limited`` one
:class:`watukuy.http.Throttled`, both with the template, like the client's own.
"""

from __future__ import annotations

from watukuy.core.errors import PathMissing, Retriable, ShowsConfigOnly, WatukuyError
from watukuy.core.observe import OutcomeKind
from watukuy.http.errors import request_line

__all__ = [
    "BadBody",
    "OAuthError",
    "OAuthUnavailable",
    "PartitionSourceError",
    "PathMissing",
    "RenderError",
    "StatusFailed",
]


class RenderError(WatukuyError, ShowsConfigOnly):
    """A template could not be rendered for a partition (e.g. its data lacks a name)."""


class BadBody(WatukuyError, ShowsConfigOnly):
    """The vendor answered 2xx, but the body is not what the poller describes."""

    kind = OutcomeKind.INVALID_BODY


class StatusFailed(WatukuyError, ShowsConfigOnly):
    """A status ``on_status`` maps to ``fail`` (by default: a 4xx other than 429)."""

    def __init__(self, *, method: str, template: str, status: int) -> None:
        self.method = method
        self.template = template
        self.status = status
        hint = " (check the credentials)" if status in (401, 403) else ""
        super().__init__(f"{request_line(method, template)} -> {status}{hint}")


class OAuthError(WatukuyError, ShowsConfigOnly):
    """The OAuth2 token endpoint refused (4xx) or answered something unusable."""


class OAuthUnavailable(OAuthError, Retriable):
    """The OAuth2 token endpoint was unreachable, timed out, throttled or failed (5xx)."""


class PartitionSourceError(WatukuyError, ShowsConfigOnly):
    """An ``http`` partition source could not list the partitions; the engine keeps the
    previous list and logs this."""
