"""An in-process vendor API for tests and demos: N tenants, cursor pagination, ETags,
per-tenant rate limits and fault injection, deterministic from a seed.

The model (:class:`VendorSimulator`) is plain Python; :func:`running_simulator` serves it over
HTTP (see :mod:`integration.simulator.app` for the endpoints)::

    sim = VendorSimulator(tenants=3, items_per_tenant=10, seed=1, now=clock)
    async with running_simulator(sim) as base_url:
        sim.update_item("t_0001", "it_00001", amount=1.0)
        sim.faults("t_0002").fail_next = 2

Besides invoices (``/{slug}/items``) every tenant has a tracker's projects, their issues, the
issues' comments and users, sized by ``tracker=TrackerSizes(...)``. ``sim.identity`` is an
OAuth2 identity provider with rotating refresh tokens and a session login (issue 45).
"""

from __future__ import annotations

from .app import build_app, running_simulator
from .identity import IdentityProvider
from .paging import decode_cursor, encode_cursor, from_iso, to_iso
from .records import (
    COLLECTIONS,
    POISON_KINDS,
    Admission,
    Change,
    Collection,
    Conflict,
    Faults,
    Item,
    LogEntry,
    NotFound,
    Tenant,
    TrackerSizes,
)
from .vendor import DEFAULT_HISTORY_END, VendorSimulator

__all__ = [
    "COLLECTIONS",
    "DEFAULT_HISTORY_END",
    "POISON_KINDS",
    "Admission",
    "Change",
    "Collection",
    "Conflict",
    "Faults",
    "IdentityProvider",
    "Item",
    "LogEntry",
    "NotFound",
    "Tenant",
    "TrackerSizes",
    "VendorSimulator",
    "build_app",
    "decode_cursor",
    "encode_cursor",
    "from_iso",
    "running_simulator",
    "to_iso",
]
