"""The records of one collection in one tenant, found by id and by parent.

A listing of a child collection (the comments of one issue) reads only that parent's records,
so serving thousands of child partitions does not scan every record of the tenant each time.
"""

from __future__ import annotations

from .records import Collection, Item


class Shelf:
    """One tenant's records of one collection; ``by_id`` is the whole of it."""

    def __init__(self, kind: Collection) -> None:
        self.kind = kind
        self.by_id: dict[str, Item] = {}
        self.parent_of: dict[str, str | None] = {}
        # Per parent id, its records' ids (a dict as an ordered set).
        self._children: dict[str | None, dict[str, None]] = {}
        self.next_number = 1

    def new_id(self) -> str:
        """The next unused ``<prefix>_<number>``, skipping ids a client chose itself."""
        kind = self.kind
        while (record_id := f"{kind.prefix}_{self.next_number:0{kind.width}d}") in self.by_id:
            self.next_number += 1
        self.next_number += 1
        return record_id

    def put(self, item: Item, parent: str | None) -> None:
        """Add a record under ``parent``, or replace one (its parent never changes)."""
        if item.id not in self.by_id:
            self.parent_of[item.id] = parent
            self._children.setdefault(parent, {})[item.id] = None
        self.by_id[item.id] = item

    def remove(self, record_id: str) -> None:
        del self.by_id[record_id]
        parent = self.parent_of.pop(record_id)
        siblings = self._children[parent]
        del siblings[record_id]
        if not siblings:
            del self._children[parent]

    def under(self, parent: str | None) -> list[Item]:
        """The records whose parent is ``parent`` (``None``: a top-level collection's all)."""
        return [self.by_id[record_id] for record_id in self._children.get(parent, {})]
