"""What a poll keeps of its listings in memory, per key, beside the cursor it commits.

Two things a committed cursor must not, or cannot, hold:

- **Next URLs.** A ``next_url`` target can carry tenant data (a host, a slug), so it is never
  written to Kafka: the cursor committed mid-listing holds an opaque id instead, and the URL
  stays here. What a restart, or another runner taking the key over, really needs is the
  poll's starting point, which the cursor keeps: without the URL behind the id the listing
  starts again from its first page, and the snapshot keeps every item already published from
  being published again (a version seen is no change). Nothing is lost, nothing is doubled;
  the pages are read again.
- **The pages walked**, to stop a vendor that sends a listing round in a loop (the same token
  or URL again): a page already left from, named as the next one, ends the poll with an error
  on the key instead of asking the vendor for ever. A page asked for again (a retry, or pages
  rolled back after a refused commit) names the same next page as before, which is no loop.

Each entry lives while its listing does; at most :data:`KEPT` listings are kept (the oldest
dropped first: a key that moved to another runner mid-listing leaves one behind).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from watukuy.declarative.errors import BadBody
from watukuy.declarative.paging import FollowUrl

__all__ = ["KEPT", "START_OVER", "Listings", "PageLoop", "StartOver", "Walk"]

KEPT = 50_000
"""Listings kept at most (one per key in the middle of one)."""

_ID = "next_url"  # the key of a stored next URL's id: {"next_url": "<id>"}


class PageLoop(BadBody):
    """The vendor named, as the next page, one this listing had already left."""


class StartOver:
    """A stored position whose next URL this process never saw (a restart, a takeover)."""


START_OVER = StartOver()


@dataclass(slots=True)
class Walk:
    """The pages of one listing: each page left from, and the page it named next."""

    edges: dict[Hashable, Any] = field(default_factory=dict)

    def step(self, position: Any, following: Any, what: str) -> None:
        """Record that the page at ``position`` named ``following``; :class:`PageLoop` (naming
        ``what``, the paginator's config path, never the token or URL) if that is a page this
        listing already left from."""
        here = _hashable(position)
        if self.edges.get(here, _NONE) == following:
            return  # the same page asked for again: it names what it named before
        if following == position or _hashable(following) in self.edges:
            raise PageLoop(
                f"{what}: the vendor named a page this listing had already read as the next "
                f"one (a loop); the poll stopped"
            )
        self.edges[here] = following


_NONE = object()


def _hashable(position: Any) -> Hashable:
    return position if isinstance(position, Hashable) else repr(position)


@dataclass(slots=True)
class _Listing:
    walk: Walk = field(default_factory=Walk)
    urls: dict[str, FollowUrl] = field(default_factory=dict)


class Listings:
    """Per key (its text form), the listing in progress in this process."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._by_key: OrderedDict[str, _Listing] = OrderedDict()

    def recall(self, key: str, position: Any) -> Any:
        """The position a page is asked for at: a stored next URL's id becomes its URL, or
        :data:`START_OVER` when this process does not know it. ``None`` (a first page) starts
        the key's listing afresh."""
        if position is None:
            self._by_key.pop(key, None)
            return None
        if not (isinstance(position, dict) and set(position) == {_ID}):
            return position
        listing = self._by_key.get(key)
        found = None if listing is None else listing.urls.get(str(position[_ID]))
        return START_OVER if found is None else found

    def walked(self, key: str, position: Any, following: Any, what: str) -> Any:
        """Record the step (see :class:`Walk`) and return what to store for ``following``:
        a next URL as an opaque id, anything else as it is."""
        listing = self._listing(key)
        listing.walk.step(position, following, what)
        if not isinstance(following, FollowUrl):
            return following
        token = next((t for t, url in listing.urls.items() if url == following), None)
        if token is None:
            token = secrets.token_hex(8)
            listing.urls[token] = following
        return {_ID: token}

    def ended(self, key: str) -> None:
        """The listing's last page is in."""
        self._by_key.pop(key, None)

    def _listing(self, key: str) -> _Listing:
        listing = self._by_key.get(key)
        if listing is None:
            listing = self._by_key[key] = _Listing()
            while len(self._by_key) > self._kept:
                self._by_key.popitem(last=False)
        else:
            self._by_key.move_to_end(key)
        return listing

    def __len__(self) -> int:
        return len(self._by_key)
