"""Which keys keep their snapshot in memory: those that needed it last, up to a budget.

A key's snapshot (one entry per item it has seen) is what change detection compares a page's
items with. Most polls never need it: a 304, a failure, an empty page. So a key is activated
without it. A page with items reads only its own items' entries (:meth:`Snapshots.read`,
point reads of the store); the whole snapshot is loaded when a reconcile page (which finds
what was deleted) or an operation needs it, and kept while it is used; past the budget, the
snapshots used longest ago are let go, and loaded again when next needed. With a local state
store the store reads them from disk, so memory is bounded by the working set, not by the
state; without one, the store holds them anyway and a key only gives back its own copy.

The budget counts entries as each snapshot was when last held (it drifts as commits add
entries, and is set right at the next hold). A key whose lock is held is never let go: a
poll, with its pages in flight, or an operation is using it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from watukuy.core.state import SnapshotEntry
from watukuy.core.validation import positive_int
from watukuy.engine.keys import KeyRuntime
from watukuy.store.base import KeyStates

__all__ = ["DEFAULT_BUDGET", "Snapshots"]

DEFAULT_BUDGET = 1_000_000  # entries: about 300 MB at the measured 290 bytes an entry


class Snapshots:
    def __init__(self, store: KeyStates, budget: int = DEFAULT_BUDGET) -> None:
        # Named as the Engine's argument: the runner's config checked it where it entered.
        positive_int(budget, "snapshot_cache", repr(budget))
        self._store = store
        self.budget = budget
        self._held: OrderedDict[str, tuple[KeyRuntime, int]] = OrderedDict()
        self.entries = 0
        self.hits = 0
        self.loads = 0
        self.point_reads = 0

    async def hold(self, runtime: KeyRuntime) -> dict[str, SnapshotEntry]:
        """``runtime``'s snapshot, loaded from the store if it was let go; the least recently
        held ones beyond the budget are let go now."""
        snapshot = runtime.snapshot
        if snapshot is None:
            stored = await self._store.load(runtime.poller.name, runtime.partition.key)
            snapshot = {} if stored is None else stored.snapshot
            if runtime.snapshot is None:  # nobody loaded it meanwhile
                runtime.snapshot = snapshot
            snapshot = runtime.snapshot
            self.loads += 1
        else:
            self.hits += 1
        key = runtime.key
        _, before = self._held.pop(key, (runtime, 0))
        self._held[key] = (runtime, len(snapshot))
        self.entries += len(snapshot) - before
        self.trim(keep=runtime)
        return snapshot

    def read(self, runtime: KeyRuntime, identities: Sequence[str]) -> dict[str, SnapshotEntry]:
        """The committed entries of ``identities`` of a key whose snapshot is not held, read
        one by one from the store and kept by nobody: a page needs only its own items'."""
        self.point_reads += len(identities)
        return self._store.entries(runtime.poller.name, runtime.partition.key, identities)

    def trim(self, keep: KeyRuntime | None = None) -> None:
        """Let the least recently held snapshots go while the budget is exceeded (a key's
        poll calls it once its lock is free: polls running together may exceed it)."""
        if self.entries <= self.budget:
            return
        for key, (runtime, size) in list(self._held.items()):
            if self.entries <= self.budget:
                return
            if runtime is keep or runtime.lock.locked():
                continue
            del self._held[key]
            runtime.snapshot = None
            self.entries -= size

    @property
    def keys(self) -> int:
        """Keys whose snapshot is held now."""
        return len(self._held)
