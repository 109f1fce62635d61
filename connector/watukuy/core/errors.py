"""Errors, named by the recovery they need rather than by where they happened."""

from __future__ import annotations


class WatukuyError(Exception):
    """Base of every error watukuy raises on purpose."""


class ConfigError(WatukuyError, ValueError):
    """The input is wrong: fix it. ``path`` names the bad field (``pollers[0].schedule.min``)."""

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class Fenced(WatukuyError):
    """Another owner took over: stop working on the key(s) and rejoin."""


class StateCorrupted(WatukuyError):
    """Stored state cannot be read: wipe the local copy and restore it."""


class NewerRelease(StateCorrupted):
    """A stored value was written by a newer release than this one (a rolling upgrade).

    Not corruption: the value is fine, this instance just cannot read it. The key waits
    for an instance that can (its partition moves there): it is neither polled nor written
    here, so its newer value survives. A ``StateCorrupted`` for callers that know no better.
    """


class Retriable(WatukuyError):
    """A passing fault (network, broker, vendor): try again later."""


class ShowsConfigOnly:
    """Mixin of errors whose text names config (a URL template, a path, a field, a status) and
    never a rendered request or partition data: their text may be stored and logged as is."""


class PathMissing(WatukuyError, LookupError, ShowsConfigOnly):
    """A configured path found nothing in a body or an item. Names the path, never values."""


class NeedsAuthorization(WatukuyError, ShowsConfigOnly):
    """A tenant's grant was refused or its refresh lost: a person must authorise the account
    again (``PUT .../partitions/{key}/credentials``, or the tenants source handing a new
    grant). Not retried on a timer. Names the tenant and a reason code, never a token."""


class IllegalTransition(WatukuyError):
    """A state machine was asked for a move its transition table does not allow."""


class Conflict(WatukuyError):
    """The request does not fit the connector's current state: change that state first (e.g.
    stop the connector before altering its offsets), then ask again."""
