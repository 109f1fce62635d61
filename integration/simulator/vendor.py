"""The state of the simulated vendor: tenants, items, faults, rate limits, request accounting.

This module is plain Python with no HTTP in it, so tests can arrange a scenario (create, update
or delete items, break a tenant) and assert on what the poller did (request counts, a log of
every request) without going through the network. ``app.py`` puts it behind aiohttp.

Determinism: every tenant, token and item comes from ``random.Random(seed)``, and the initial
items are stamped in the 30 days before ``history_end`` (a fixed date by default), so two
simulators built with the same arguments hold the same data whatever the clock says. Later
changes are stamped with the injected ``now`` clock, but never at or before the tenant's latest
stamp: ``updated_at`` is strictly increasing per tenant, which is what makes a ``resume`` cursor
see every change made after it was issued (see ``paging.py``).
"""

from __future__ import annotations

import hmac
import math
import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .identity import IdentityProvider
from .paging import Page, Position, seconds_to_micros, select_page, to_iso
from .poison import poison_kind, poisoned
from .records import (
    COLLECTIONS,
    Admission,
    Change,
    Conflict,
    Faults,
    Item,
    LogEntry,
    NotFound,
    Tenant,
    TrackerSizes,
    collection,
    is_int,
    make_item,
    require,
)
from .shelf import Shelf
from .tracker import generate, mutate_tracker
from .truth import GroundTruth

DEFAULT_HISTORY_END = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
"""The initial items of every tenant were last updated in the 30 days before this moment."""

_HISTORY_SECONDS = 30 * 24 * 3600
_RESERVED = frozenset({"id", "etag", "updated_at"})
_COMPANIES = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka")
_ADJECTIVES = ("red", "quiet", "rapid", "golden", "tiny", "brave", "lucky", "silver")
_NOUNS = ("invoice", "order", "ticket", "parcel", "lead", "refund", "payment", "quote")
_CURRENCIES = ("EUR", "USD", "PEN")
_STATUSES = ("active", "active", "archived")
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass
class _TenantState:
    tenant: Tenant
    last_stamp: int
    shelves: dict[str, Shelf] = field(
        default_factory=lambda: {name: Shelf(kind) for name, kind in COLLECTIONS.items()}
    )
    faults: Faults = field(default_factory=Faults)
    window_start: float | None = None
    window_used: int = 0
    requests: int = 0
    log: list[LogEntry] = field(default_factory=list)
    first_request: float | None = None  # when its first API request came (``now``)


class VendorSimulator:
    """An in-memory multi-tenant vendor API, deterministic from ``seed``.

    ``quota`` requests per ``window`` seconds are allowed per tenant (a fixed window that
    starts with the first request after the previous one ended), read from ``now``.
    """

    def __init__(
        self,
        tenants: int = 3,
        items_per_tenant: int = 20,
        *,
        seed: int = 0,
        quota: int = 1000,
        window: float = 60.0,
        now: Callable[[], float] = time.time,
        history_end: float = DEFAULT_HISTORY_END,
        tracker: TrackerSizes = TrackerSizes(),  # noqa: B008 (frozen, so one shared value is safe)
    ) -> None:
        require(is_int(quota) and quota >= 1, "quota must be an integer >= 1")
        require(window > 0, "window must be > 0 seconds")
        self.quota = quota
        self.window = window
        self.items_per_tenant = items_per_tenant
        self.tracker = tracker
        self._now = now
        self.identity = IdentityProvider(now)  # OAuth2 and session tokens (issue 45)
        self._history_end = seconds_to_micros(history_end)
        self._rng = random.Random(seed)
        self._fault_rng = random.Random(f"{seed}/faults")
        self._mutation_rng = random.Random(f"{seed}/mutations")
        # The tracker collections draw from their own RNGs, so the items (and every test
        # written against them) are the same whatever the tracker sizes.
        self._tracker_rng = random.Random(f"{seed}/tracker")
        self._tracker_mutation_rng = random.Random(f"{seed}/tracker-mutations")
        self._states: dict[str, _TenantState] = {}
        self._truth = GroundTruth()
        self._by_slug: dict[str, Tenant] = {}  # every request looks its tenant up by slug
        self._next_tenant = 1
        self._total_requests = 0
        # Told of every create, update and delete, after the write (a delete: before, so the
        # record's lineage is still known). The webhook sender listens here, so the model
        # knows nothing of HTTP; a listener must neither block nor raise.
        self.listeners: list[Callable[[Change], None]] = []
        for _ in range(tenants):
            self.add_tenant()

    # -- tenants ----------------------------------------------------------------------------

    @property
    def tenants(self) -> list[Tenant]:
        return [state.tenant for state in self._states.values()]

    def tenant(self, tenant_id: str) -> Tenant:
        return self._state(tenant_id).tenant

    def tenant_by_slug(self, slug: str) -> Tenant | None:
        return self._by_slug.get(slug)

    def add_tenant(self, slug: str | None = None, items: int | None = None) -> Tenant:
        """Add a tenant with ``items`` (default ``items_per_tenant``) generated items."""
        number = self._next_tenant
        # Draw the default slug even when one is given, so later draws do not depend on it.
        default_slug = f"{self._rng.choice(_COMPANIES)}-{number}"
        token = f"tok_{self._rng.getrandbits(128):032x}"
        slug = default_slug if slug is None else slug
        require(_valid_slug(slug), f"slug must match [a-z0-9][a-z0-9-]*, got {slug!r}")
        if self.tenant_by_slug(slug) is not None:
            raise Conflict(f"slug {slug!r} is taken")
        self._next_tenant += 1
        tenant = Tenant(id=f"t_{number:04d}", slug=slug, token=token)
        state = _TenantState(tenant=tenant, last_stamp=self._history_end)
        self._states[tenant.id] = state
        self._by_slug[tenant.slug] = tenant
        self._truth.open(tenant.id)
        for _ in range(self.items_per_tenant if items is None else items):
            self._add_history_item(state)
        self._add_history_tracker(state)
        return tenant

    def remove_tenant(self, tenant_id: str) -> None:
        state = self._state(tenant_id)
        del self._states[tenant_id]
        del self._by_slug[state.tenant.slug]

    def check_token(self, tenant_id: str, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header carries this tenant's bearer token."""
        expected = f"Bearer {self._state(tenant_id).tenant.token}"
        return authorization is not None and hmac.compare_digest(authorization, expected)

    # -- items and the other collections ---------------------------------------------------

    def items(self, tenant_id: str) -> list[dict[str, Any]]:
        """Every live item of a tenant, in listing order."""
        return self.records(tenant_id, "items")

    def item(self, tenant_id: str, item_id: str) -> dict[str, Any]:
        return self._record(self._state(tenant_id), "items", item_id).to_json()

    def create_item(self, tenant_id: str, /, **item_fields: Any) -> dict[str, Any]:
        """Create an item; unspecified fields are generated, ``id`` may be given."""
        return self.create_record(tenant_id, "items", **item_fields)

    def update_item(self, tenant_id: str, item_id: str, /, **item_fields: Any) -> dict[str, Any]:
        """Merge ``item_fields`` into an item; it gets a new ``etag`` and ``updated_at``."""
        return self.update_record(tenant_id, "items", item_id, **item_fields)

    def delete_item(self, tenant_id: str, item_id: str) -> None:
        self.delete_record(tenant_id, "items", item_id)

    def records(self, tenant_id: str, name: str) -> list[dict[str, Any]]:
        """Every live record of collection ``name`` in listing order, a child's with its
        parent's id under the collection's ``parent_field`` (the admin API's ground truth)."""
        shelf = self._state(tenant_id).shelves[collection(name).name]
        ordered = sorted(shelf.by_id.values(), key=lambda item: item.position)
        return [self._admin_json(shelf, item) for item in ordered]

    def create_record(self, tenant_id: str, name: str, /, **fields: Any) -> dict[str, Any]:
        """Create a record; unspecified fields are generated, ``id`` may be given, and a child
        names its parent in its ``parent_field`` (``project=`` for an issue)."""
        kind, state = collection(name), self._state(tenant_id)
        shelf = state.shelves[kind.name]
        require(not set(fields) & (_RESERVED - {"id"}), "etag/updated_at are computed")
        parent = self._parent_of_new(state, name, fields)
        record_id = fields.pop("id", None)
        if record_id is None:
            record_id = shelf.new_id()
        require(isinstance(record_id, str) and record_id != "", "id must be a non-empty string")
        if record_id in shelf.by_id:
            raise Conflict(f"{COLLECTIONS[name].noun} {record_id!r} exists")
        stamp = self._stamp(state)
        if name == "items":
            generated = self._random_fields() | {"created_at": to_iso(stamp)}
        else:
            generated = generate(name, self._tracker_rng, _emails(state))
        shelf.put(make_item(record_id, stamp, generated | fields), parent)
        self._changed(state, "created", name, record_id)
        return self._admin_json(shelf, shelf.by_id[record_id])

    def update_record(
        self, tenant_id: str, name: str, record_id: str, /, **fields: Any
    ) -> dict[str, Any]:
        """Merge ``fields`` into a record; it gets a new ``etag`` and ``updated_at``."""
        kind, state = collection(name), self._state(tenant_id)
        # A child never moves to another parent; the items' message is the one it always was.
        moved = f"/{kind.parent_field}" if kind.parent_field else ""
        fixed = _RESERVED | ({kind.parent_field} if kind.parent_field else set())
        require(not (set(fields) & fixed), f"id/etag/updated_at{moved} cannot be set")
        current = self._record(state, name, record_id)
        shelf = state.shelves[name]
        shelf.put(make_item(record_id, self._stamp(state), current.fields | fields), None)
        self._changed(state, "updated", name, record_id)
        return self._admin_json(shelf, shelf.by_id[record_id])

    def delete_record(self, tenant_id: str, name: str, record_id: str) -> None:
        """Delete a record and, as a tracker does, everything under it (an issue's comments)."""
        state = self._state(tenant_id)
        self._record(state, collection(name).name, record_id)
        # One change for the record named; what goes with it (its comments) is implied, as a
        # vendor sends one ``issue.deleted``.
        self._changed(state, "deleted", name, record_id)
        self._remove(state, name, record_id)

    def page(
        self,
        tenant_id: str,
        after: Position,
        limit: int,
        name: str = "items",
        parents: tuple[str, ...] = (),
        where: Callable[[Item], bool] | None = None,
    ) -> Page[Item]:
        """One page of a listing; a child collection's is of the records under ``parents``
        (its ancestors' ids, outermost first), each of which must exist under the one before;
        ``where`` keeps only some of a top-level collection's records (a mail folder's)."""
        state, kind = self._state(tenant_id), collection(name)
        shelf = state.shelves[name]
        if kind.parent is None:
            kept = shelf.by_id.values() if where is None else filter(where, shelf.by_id.values())
            return select_page(kept, after, limit)
        self._check_lineage(state, kind.parent, parents)
        return select_page(shelf.under(parents[-1]), after, limit)

    def mutate_randomly(self) -> tuple[str, str, str] | None:
        """Make one random change (mostly updates), for demos; returns (op, tenant, item)."""
        if not self._states:
            return None
        rng = self._mutation_rng
        state = self._states[rng.choice(sorted(self._states))]
        tenant_id = state.tenant.id
        items = state.shelves["items"].by_id
        roll = rng.random()
        if not items or roll < 0.3:
            return ("create", tenant_id, self.create_item(tenant_id)["id"])
        item_id = rng.choice(sorted(items))
        if roll < 0.4:
            self.delete_item(tenant_id, item_id)
            return ("delete", tenant_id, item_id)
        self.update_item(tenant_id, item_id, amount=round(rng.uniform(1, 1000), 2))
        return ("update", tenant_id, item_id)

    def mutate_tracker_randomly(self) -> tuple[str, str, str, str] | None:
        """Make one random change to the tracker collections, drawn apart from the items'
        (see :func:`~.tracker.mutate_tracker`); returns (op, tenant, collection, id)."""
        return mutate_tracker(self, self._tracker_mutation_rng)

    # -- faults and rate limits -------------------------------------------------------------

    def faults(self, tenant_id: str) -> Faults:
        """The tenant's live fault settings; assign to their attributes to break it."""
        state = self._state(tenant_id)
        heals_at = state.faults.heals_at
        if heals_at is not None and self._now() >= heals_at:
            state.faults = Faults()
        return state.faults

    def set_faults(
        self, tenant_id: str, heal_after: float | None = None, **settings: Any
    ) -> Faults:
        """Replace the tenant's faults; fields not given take their defaults (``{}`` heals).

        ``heal_after`` (seconds) lifts them that long from now, e.g. a 5xx storm of 10 s is
        ``set_faults(t, error_rate=1.0, heal_after=10)``.
        """
        state = self._state(tenant_id)
        if heal_after is not None:
            require(_is_seconds(heal_after), "heal_after: seconds > 0")
            settings["heals_at"] = self._now() + heal_after
        state.faults = Faults.from_json(settings)
        return state.faults

    def take_failure(self, tenant_id: str) -> bool:
        """Whether this request fails by injection; consumes one ``fail_next``."""
        faults = self.faults(tenant_id)
        if faults.fail_next > 0:
            faults.fail_next -= 1
            return True
        return faults.error_rate > 0 and self._fault_rng.random() < faults.error_rate

    def admit(self, tenant_id: str) -> Admission:
        """Count a request against the tenant's quota, unless it is already used up."""
        state = self._state(tenant_id)
        current = self._now()
        self._roll_window(state, current)
        allowed = state.window_used < self.quota
        if allowed:
            state.window_used += 1
        return self._admission(state, current, allowed)

    def rate_status(self, tenant_id: str) -> Admission:
        """The tenant's quota as it stands, without counting a request."""
        state = self._state(tenant_id)
        current = self._now()
        self._roll_window(state, current)
        return self._admission(state, current, state.window_used < self.quota)

    # -- accounting -------------------------------------------------------------------------

    def record(self, tenant_id: str | None, path: str, query: dict[str, str], status: int) -> None:
        """Account for one API request (the app calls this; admin calls are not counted)."""
        self._total_requests += 1
        state = self._states.get(tenant_id) if tenant_id is not None else None
        if state is not None:
            state.requests += 1
            state.log.append(LogEntry(path, query, status))
            if state.first_request is None:
                state.first_request = self._now()

    def request_count(self, tenant_id: str | None = None) -> int:
        """Requests seen for one tenant, or in total (``/tenants`` and 404s included)."""
        return self._total_requests if tenant_id is None else self._state(tenant_id).requests

    def log(self, tenant_id: str) -> list[LogEntry]:
        return list(self._state(tenant_id).log)

    def first_requests(self) -> tuple[int, list[float]]:
        """How many tenants there are, and when each one that had an API request had its
        first (``now``'s time), in order: the benchmarks' "every tenant polled once"."""
        times = [s.first_request for s in self._states.values() if s.first_request is not None]
        return len(self._states), sorted(times)

    def reset_stats(self) -> None:
        self._total_requests = 0
        for state in self._states.values():
            state.requests = 0
            state.log.clear()
            state.first_request = None

    # -- ground truth -----------------------------------------------------------------------

    def render(
        self, tenant_id: str, item: Item, name: str = "items"
    ) -> tuple[dict[str, Any], str | None]:
        """A record's JSON as a listing serves it now, and its kind of poison (None: intact)."""
        faults = self.faults(tenant_id)
        kind = poison_kind(tenant_id, item, faults)
        if kind is None:
            return item.to_json(), None
        return poisoned(item, kind, faults.poison_bytes, collection(name)), kind

    def record_served(
        self,
        tenant_id: str,
        items: Iterable[tuple[Item, str | None]],
        name: str = "items",
        parent: str | None = None,
    ) -> None:
        """Note the versions a page of ``name`` (under ``parent``) handed out, each with its
        kind of poison or None (the app calls this for each listing a client can read)."""
        self._truth.note(tenant_id, items, name, parent)

    def served(self, tenant_id: str, name: str = "items") -> list[dict[str, str | None]]:
        """Every version of a collection served in a page, once each, in the order first
        served; a tenant keeps its log after removal.

        ``version`` is the record's ``etag``, what the invoices pollers use as their version,
        so each entry should match exactly one event. A child collection's entries also name
        their parent (``project`` for an issue), which gives the child partition's key.
        """
        return self._truth.served(tenant_id, name)

    def poisoned(self, tenant_id: str, name: str = "items") -> list[dict[str, str | None]]:
        """Every version served poisoned, ``{"id", "version", "kind"}``, once each: these have
        no event, each has one dead letter. Kept after the tenant's removal."""
        return self._truth.poisoned(tenant_id, name)

    # -- internals --------------------------------------------------------------------------

    def _state(self, tenant_id: str) -> _TenantState:
        try:
            return self._states[tenant_id]
        except KeyError:
            raise NotFound(f"no tenant {tenant_id!r}") from None

    def _record(self, state: _TenantState, name: str, record_id: str) -> Item:
        try:
            return state.shelves[name].by_id[record_id]
        except KeyError:
            raise NotFound(
                f"no {COLLECTIONS[name].noun} {record_id!r} in tenant {state.tenant.id!r}"
            ) from None

    def _parent_of_new(self, state: _TenantState, name: str, fields: dict[str, Any]) -> str | None:
        """The existing parent a new child record names (taken out of ``fields``)."""
        kind = COLLECTIONS[name]
        if kind.parent is None or kind.parent_field is None:
            return None
        parent = fields.pop(kind.parent_field, None)
        require(
            isinstance(parent, str),
            f"{kind.parent_field}: the id of its {COLLECTIONS[kind.parent].noun}",
        )
        assert isinstance(parent, str)
        self._record(state, kind.parent, parent)
        return parent

    def _check_lineage(self, state: _TenantState, name: str, ids: tuple[str, ...]) -> None:
        """``ids[-1]`` is a record of ``name`` whose ancestors are ``ids[:-1]``, or NotFound."""
        kind, record_id = COLLECTIONS[name], ids[-1]
        shelf = state.shelves[name]
        if record_id not in shelf.by_id:
            raise NotFound(f"no {kind.noun} {record_id!r}")
        if kind.parent is not None:
            if shelf.parent_of[record_id] != ids[-2]:
                parent = COLLECTIONS[kind.parent].noun
                raise NotFound(f"no {kind.noun} {record_id!r} in {parent} {ids[-2]!r}")
            self._check_lineage(state, kind.parent, ids[:-1])

    def _remove(self, state: _TenantState, name: str, record_id: str) -> None:
        for child in COLLECTIONS.values():
            if child.parent == name:
                for item in state.shelves[child.name].under(record_id):
                    self._remove(state, child.name, item.id)
        state.shelves[name].remove(record_id)

    def _changed(self, state: _TenantState, operation: str, name: str, record_id: str) -> None:
        parents: list[str] = []
        kind, child = COLLECTIONS[name], record_id
        while kind.parent is not None:  # walk up: a comment's issue, then the issue's project
            parent = state.shelves[kind.name].parent_of[child]
            assert parent is not None  # a child collection's record always has one
            parents.insert(0, parent)
            child = parent
            kind = COLLECTIONS[kind.parent]
        change = Change(operation, state.tenant.id, name, record_id, tuple(parents))
        for listener in list(self.listeners):
            listener(change)

    def _admin_json(self, shelf: Shelf, item: Item) -> dict[str, Any]:
        body = item.to_json()
        if shelf.kind.parent_field is not None:
            body[shelf.kind.parent_field] = shelf.parent_of[item.id]
        return body

    def _stamp(self, state: _TenantState) -> int:
        """The next ``updated_at`` of a tenant: the clock, but strictly after the last one."""
        state.last_stamp = max(seconds_to_micros(self._now()), state.last_stamp + 1)
        return state.last_stamp

    def _add_history_item(self, state: _TenantState) -> None:
        """An initial item, stamped (to the second) in the history window before the start."""
        stamp = self._history_end - self._rng.randint(0, _HISTORY_SECONDS) * 1_000_000
        shelf = state.shelves["items"]
        item_id = shelf.new_id()
        generated = self._random_fields() | {"created_at": to_iso(stamp)}
        shelf.put(make_item(item_id, stamp, generated), None)

    def _add_history_tracker(self, state: _TenantState) -> None:
        """A new tenant's users, projects, their issues and the issues' comments."""
        sizes = self.tracker
        for _ in range(sizes.users):
            self._add_history_record(state, "users", None)
        for _ in range(sizes.projects):
            project = self._add_history_record(state, "projects", None)
            for _ in range(sizes.issues_per_project):
                issue = self._add_history_record(state, "issues", project)
                for _ in range(sizes.comments_per_issue):
                    self._add_history_record(state, "comments", issue)

    def _add_history_record(self, state: _TenantState, name: str, parent: str | None) -> str:
        rng, shelf = self._tracker_rng, state.shelves[name]
        stamp = self._history_end - rng.randint(0, _HISTORY_SECONDS) * 1_000_000
        record_id = shelf.new_id()
        shelf.put(make_item(record_id, stamp, generate(name, rng, _emails(state))), parent)
        return record_id

    def _random_fields(self) -> dict[str, Any]:
        rng = self._rng
        return {
            "name": f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}",
            "amount": round(rng.uniform(1, 1000), 2),
            "currency": rng.choice(_CURRENCIES),
            "status": rng.choice(_STATUSES),
        }

    def _roll_window(self, state: _TenantState, current: float) -> None:
        if state.window_start is None or current >= state.window_start + self.window:
            state.window_start = current
            state.window_used = 0

    def _admission(self, state: _TenantState, current: float, allowed: bool) -> Admission:
        start = current if state.window_start is None else state.window_start
        reset = max(1, math.ceil(start + self.window - current))
        remaining = self.quota - state.window_used
        return Admission(allowed=allowed, limit=self.quota, remaining=remaining, reset=reset)


def _emails(state: _TenantState) -> list[str]:
    """The tenant's users' addresses, in id order: whom reporters and authors are drawn from."""
    users = state.shelves["users"].by_id
    return [str(users[user_id].fields.get("email")) for user_id in sorted(users)]


def _is_seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _valid_slug(slug: object) -> bool:
    """Lowercase words and dashes: a slug can never collide with the ``/_admin`` routes."""
    return isinstance(slug, str) and _SLUG.fullmatch(slug) is not None
