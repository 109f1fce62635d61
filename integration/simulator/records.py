"""The values the simulator hands out and takes in: tenants, items, collections, faults,
verdicts, errors.

Kept apart from the model in ``vendor.py`` so both stay small; nothing here holds state
beyond its own fields.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

from .paging import Position, to_iso


class NotFound(LookupError):
    """No such tenant or item (the admin API answers 404)."""


class Conflict(ValueError):
    """The id or slug is taken (the admin API answers 409)."""


@dataclass(frozen=True)
class Tenant:
    """One customer account of the vendor: a partition of the poller under test."""

    id: str
    slug: str
    token: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "slug": self.slug, "token": self.token}


@dataclass
class Item:
    """One record; ``stamp`` is ``updated_at`` in microseconds, ``etag`` changes on every write."""

    id: str
    stamp: int
    etag: str
    fields: dict[str, Any]

    @property
    def position(self) -> Position:
        return (self.stamp, self.id)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "etag": self.etag, "updated_at": to_iso(self.stamp)} | self.fields


def make_item(item_id: str, stamp: int, item_fields: dict[str, Any]) -> Item:
    """Build an item whose etag is a digest of everything it holds."""
    content = json.dumps([item_id, stamp, item_fields], sort_keys=True, default=str)
    etag = hashlib.sha256(content.encode()).hexdigest()[:16]
    return Item(id=item_id, stamp=stamp, etag=etag, fields=dict(item_fields))


@dataclass(frozen=True)
class Collection:
    """One kind of record a tenant holds, served under its own path (see ``app.py``).

    A child collection lives under one record of ``parent`` (an issue under a project); the
    admin API names that parent in the field ``parent_field`` (``"project"``). Ids are
    ``<prefix>_<number>``, unique within the tenant, so a child's id alone finds it.
    ``text_field`` is the text an ``oversized`` poison pads.
    """

    name: str
    prefix: str
    width: int
    parent: str | None = None
    parent_field: str | None = None
    text_field: str = "name"

    @property
    def noun(self) -> str:
        """``item`` for ``items``, as error messages say it: every name is a plain plural."""
        return self.name.removesuffix("s")


COLLECTIONS: dict[str, Collection] = {
    c.name: c
    for c in (
        Collection("items", "it", 5),
        Collection("projects", "pr", 4),
        Collection(
            "issues", "is", 5, parent="projects", parent_field="project", text_field="title"
        ),
        Collection("comments", "cm", 5, parent="issues", parent_field="issue", text_field="body"),
        Collection("users", "us", 4),
    )
}
"""Every collection by name: ``items`` (invoices), and a tracker's projects, their issues,
the issues' comments and users."""


def collection(name: str) -> Collection:
    """The collection called ``name``; an unknown one is a ``ValueError`` (400 on the admin API)."""
    found = COLLECTIONS.get(name)
    require(found is not None, f"no collection {name!r} (one of {', '.join(COLLECTIONS)})")
    assert found is not None
    return found


@dataclass(frozen=True)
class Change:
    """One write to a tenant's records, as the model tells its listeners (the webhook sender):
    ``operation`` is ``created``, ``updated`` or ``deleted``; ``parents`` are the record's
    ancestors' ids, outermost first (an issue's project; a comment's project and issue)."""

    operation: str
    tenant_id: str
    collection: str
    record_id: str
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrackerSizes:
    """How many tracker records each new tenant starts with; all zero gives none."""

    projects: int = 2
    issues_per_project: int = 3
    comments_per_issue: int = 2
    users: int = 3

    def __post_init__(self) -> None:
        for name in ("projects", "issues_per_project", "comments_per_issue", "users"):
            value = getattr(self, name)
            require(is_int(value) and value >= 0, f"{name} must be an integer >= 0")


POISON_KINDS = ("malformed", "schema", "oversized", "oversized_malformed")
"""How a poisoned item is served (see ``poison.py``): without a usable ``id``, with an
``amount`` the invoice schema refuses, larger than a Kafka record may be, or both large and
without an ``id``."""


@dataclass
class Faults:
    """What goes wrong for one tenant; the model and the admin endpoint set it alike.

    ``delay`` is the answer time of each admitted request: its answer, whatever it is, leaves
    that long after the request came (the simulator's own work included). A failure strikes
    first (``fail_next``, then ``error_rate``, drawn from a seeded RNG), answered with
    ``fail_status`` (a 429 carries
    ``Retry-After: retry_after``; with ``echo_request`` the error body quotes the request's
    path, query and headers, ``Authorization`` included, as careless vendors do). A successful
    listing is then mangled by ``malformed_json`` (body cut in half) or ``drop_id``, and a
    ``poison_rate`` share of its items (chosen by id, so every version of a chosen item) is
    served poisoned, as one of ``poison_kinds``; an oversized one carries ``poison_bytes`` of
    text. With ``heals_at`` (a time of the simulator's clock), all of it is lifted once the
    clock reaches it.
    """

    fail_next: int = 0
    error_rate: float = 0.0
    fail_status: int = 503
    retry_after: int = 1
    echo_request: bool = False
    delay: float = 0.0
    malformed_json: bool = False
    drop_id: bool = False
    poison_rate: float = 0.0
    poison_kinds: tuple[str, ...] = POISON_KINDS
    poison_bytes: int = 1_200_000
    heals_at: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.poison_kinds, list):  # from JSON
            self.poison_kinds = tuple(self.poison_kinds)
        require(is_int(self.fail_next) and self.fail_next >= 0, "fail_next: integer >= 0")
        require(_is_number(self.error_rate), "error_rate: number between 0 and 1")
        require(0.0 <= self.error_rate <= 1.0, "error_rate: number between 0 and 1")
        require(is_int(self.fail_status), "fail_status: HTTP error status 400..599")
        require(400 <= self.fail_status <= 599, "fail_status: HTTP error status 400..599")
        require(is_int(self.retry_after) and self.retry_after >= 0, "retry_after: seconds >= 0")
        require(isinstance(self.echo_request, bool), "echo_request: boolean")
        require(_is_number(self.delay) and self.delay >= 0, "delay: seconds >= 0")
        require(isinstance(self.malformed_json, bool), "malformed_json: boolean")
        require(isinstance(self.drop_id, bool), "drop_id: boolean")
        require(_is_number(self.poison_rate), "poison_rate: number between 0 and 1")
        require(0.0 <= self.poison_rate <= 1.0, "poison_rate: number between 0 and 1")
        kinds_ok = isinstance(self.poison_kinds, tuple) and len(self.poison_kinds) > 0
        kinds_ok = kinds_ok and all(kind in POISON_KINDS for kind in self.poison_kinds)
        require(kinds_ok, f"poison_kinds: a non-empty list of {', '.join(POISON_KINDS)}")
        require(is_int(self.poison_bytes), "poison_bytes: integer >= 1")
        require(self.poison_bytes >= 1, "poison_bytes: integer >= 1")
        heals_ok = self.heals_at is None or _is_number(self.heals_at)
        require(heals_ok, "heals_at: a time in seconds, or null")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Faults:
        """Build from an admin request body; unknown keys are refused rather than ignored."""
        unknown = set(data) - {f.name for f in fields(cls)}
        require(not unknown, f"unknown fault(s): {', '.join(sorted(unknown))}")
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"poison_kinds": list(self.poison_kinds)}


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class LogEntry(NamedTuple):
    """One request as the vendor saw it."""

    path: str
    query: dict[str, str]
    status: int


@dataclass(frozen=True)
class Admission:
    """The rate limiter's verdict on a request, and the headers that report it."""

    allowed: bool
    limit: int
    remaining: int
    reset: int
    """Whole seconds until the window starts afresh."""

    def headers(self) -> dict[str, str]:
        values = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset),
        }
        return values if self.allowed else values | {"Retry-After": str(self.reset)}
