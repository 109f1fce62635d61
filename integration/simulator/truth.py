"""The vendor's ground truth: every record version a listing handed out, intact or poisoned.

Kept apart from the tenants' state so it outlives a tenant (a fault suite verifies the events
of removed tenants too), and per collection so a test of a connector with several streams can
check each stream's events against exactly what its endpoint served.
"""

from __future__ import annotations

from collections.abc import Iterable

from .records import COLLECTIONS, Item, NotFound, collection

_Version = tuple[str, str]
"""``(record id, etag)``."""


class GroundTruth:
    """Per tenant id and collection, versions in first-served order, each once."""

    def __init__(self) -> None:
        # A dict is an ordered set here; the value is the parent's id (None at the top level).
        self._served: dict[str, dict[str, dict[_Version, str | None]]] = {}
        # The same, served poisoned: the value is (kind of poison, parent's id).
        self._poisoned: dict[str, dict[str, dict[_Version, tuple[str, str | None]]]] = {}

    def open(self, tenant_id: str) -> None:
        """Start the logs of a new tenant."""
        self._served[tenant_id] = {name: {} for name in COLLECTIONS}
        self._poisoned[tenant_id] = {name: {} for name in COLLECTIONS}

    def note(
        self,
        tenant_id: str,
        items: Iterable[tuple[Item, str | None]],
        name: str = "items",
        parent: str | None = None,
    ) -> None:
        """Note the versions a page of ``name`` under ``parent`` handed out, each with its kind
        of poison or None."""
        served, poisoned_log = self._served[tenant_id][name], self._poisoned[tenant_id][name]
        for item, kind in items:
            if kind is None:
                served.setdefault((item.id, item.etag), parent)
            else:
                poisoned_log.setdefault((item.id, item.etag), (kind, parent))

    def served(self, tenant_id: str, name: str = "items") -> list[dict[str, str | None]]:
        """``[{"id", "version"}]``, a child collection's also naming its parent (``project``
        for an issue): each entry should match exactly one event."""
        kind = collection(name)
        self._check(tenant_id)
        log = self._served[tenant_id][name]
        entries: list[dict[str, str | None]] = []
        for (record_id, version), parent in log.items():
            entry: dict[str, str | None] = {"id": record_id, "version": version}
            if kind.parent_field is not None:
                entry[kind.parent_field] = parent
            entries.append(entry)
        return entries

    def poisoned(self, tenant_id: str, name: str = "items") -> list[dict[str, str | None]]:
        """``[{"id", "version", "kind"}]`` (and the parent, as in :meth:`served`): these have
        no event, each has one dead letter."""
        kind = collection(name)
        self._check(tenant_id)
        log = self._poisoned[tenant_id][name]
        entries: list[dict[str, str | None]] = []
        for (record_id, version), (poison, parent) in log.items():
            entry: dict[str, str | None] = {"id": record_id, "version": version, "kind": poison}
            if kind.parent_field is not None:
                entry[kind.parent_field] = parent
            entries.append(entry)
        return entries

    def _check(self, tenant_id: str) -> None:
        if tenant_id not in self._served:
            raise NotFound(f"no tenant {tenant_id!r}")
