"""What a scrape shows of the held keys, kept up to date as the keys change.

Metrics show each held key's lag, circuit and parked counts, and per poller how many keys are
held and how many wait for a newer release (:class:`~watukuy.core.inspect.PollerInspect` says
the same things, and more). Building every key's inspection at each scrape cost several µs a
key; here the engine puts a key's figures into a :class:`FigureTable` whenever they may have
changed (the same moments a status round learns of), and the table keeps them, in key order,
along with what they add up to per poller. A scrape reads what is there: with a ``partition``
label it walks the keys, without one it reads the sums, whatever the number of keys.

A key that waits for a newer release (``waiting``) is counted apart: its lag, circuit and
parked counts are a fresh key's, not its own, so they are in no sum.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from watukuy.core.clock import Clock

__all__ = ["CIRCUIT_STATES", "PARKED_KINDS", "FigureTable", "KeyFigures", "PollerFigures"]

CIRCUIT_STATES = ("closed", "half-open", "open")
"""A circuit's states (:class:`~watukuy.core.circuit.CircuitState` values), in text order."""
PARKED_KINDS = ("invalid", "poison")
"""The parked kinds every key shows, with 0 when it has none of them."""

Parked = tuple[tuple[str, int], ...]
NOTHING_PARKED: Parked = tuple((kind, 0) for kind in PARKED_KINDS)


def parked_counts(kinds: Sequence[str]) -> Parked:
    """``(kind, count)`` per kind, in text order: each of :data:`PARKED_KINDS` even at 0, and
    any other kind ``kinds`` names."""
    if not kinds:
        return NOTHING_PARKED
    counts = dict.fromkeys(PARKED_KINDS, 0)
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return tuple(sorted(counts.items()))


@dataclass(slots=True, eq=False)
class KeyFigures:
    """One held key's figures. Read-only outside its table, which updates it in place."""

    key: str
    poller: str
    partition: str
    last_success: float | None
    circuit: str
    parked: Parked
    waiting: bool
    shape: int = 0
    """Moves whenever anything but the time of its last success does (its circuit, parked
    counts, whether it waits, whether it ever succeeded): what a reader keeps of a key's
    lines holds while this stays."""


@dataclass(slots=True, eq=False)
class PollerFigures:
    """A poller's keys added up. Read-only outside the table."""

    held: int = 0
    """Keys held and run here (not waiting)."""
    waiting: int = 0
    """Keys held but waiting for a newer release."""
    circuits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CIRCUIT_STATES, 0))
    """Held keys (not waiting) per circuit state."""
    parked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PARKED_KINDS, 0))
    """Parked items of the held keys (not waiting) per kind."""
    successes: list[tuple[float, str]] = field(default_factory=list)
    """A heap of ``(last_success, key)``: its top is the oldest last success, once entries
    that no longer hold (the key polled again, or gone) are taken off it."""


def _order(row: KeyFigures) -> tuple[str, str]:
    return row.poller, row.partition


class FigureTable:
    """The held keys' figures, in ``(poller, partition)`` order, and per poller their sums.

    :meth:`put` and :meth:`drop` cost what one key's change costs (its old figures taken out
    of its poller's sums, the new ones added); :meth:`rows` sorts again only what joined since
    its last call.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._rows: dict[str, KeyFigures] = {}
        self._pollers: dict[str, PollerFigures] = {}
        self._order: list[KeyFigures] = []
        self._joined: list[KeyFigures] = []  # not in _order yet
        self._ordered = False  # whether _order is kept: from the first rows() on
        self._left = False  # _order holds rows no longer in the table
        self._heaped = 0  # entries in every poller's heap, stale ones included
        self._oldest = False  # whether the heaps are kept: from the first oldest_success() on
        self.members = 0
        """How many times a key came or left: a reader's cue that :meth:`rows` changed."""
        self.shapes = 0
        """How many times a key's :attr:`KeyFigures.shape` moved."""

    def put(
        self,
        key: str,
        poller: str,
        partition: str,
        last_success: float | None,
        circuit: str,
        parked: Parked,
        waiting: bool,
    ) -> None:
        """The key's figures now (a key not in the table joins it)."""
        row = self._rows.get(key)
        if row is None:
            row = KeyFigures(key, poller, partition, last_success, circuit, parked, waiting)
            self._rows[key] = row
            if self._ordered:
                self._joined.append(row)
            self.members += 1
            self._add(self._poller(poller), row)
            return
        if (row.circuit, row.parked, row.waiting) == (circuit, parked, waiting):
            if row.last_success != last_success:  # a poll: the one change most puts bring
                if (row.last_success is None) != (last_success is None):
                    row.shape += 1
                    self.shapes += 1
                row.last_success = last_success
                if self._oldest and not waiting:
                    sums = self._pollers[poller]
                    if last_success is None:
                        self._settle(sums)  # its entry went stale
                    else:
                        self._push(sums, last_success, key)
            return
        sums = self._pollers[poller]
        self._take(sums, row)
        row.last_success, row.circuit, row.parked, row.waiting = (
            last_success,
            circuit,
            parked,
            waiting,
        )
        row.shape += 1
        self.shapes += 1
        self._add(sums, row)
        if self._oldest:
            self._settle(sums)

    def drop(self, key: str) -> None:
        """The key is not held any more."""
        row = self._rows.pop(key, None)
        if row is None:
            return
        sums = self._pollers[row.poller]
        self._take(sums, row)
        self._left = True
        self.members += 1
        if not sums.held and not sums.waiting:
            self._heaped -= len(sums.successes)
            del self._pollers[row.poller]
        elif self._oldest:
            self._settle(sums)

    def rows(self) -> list[KeyFigures]:
        """Every held key's figures, waiting ones included, in ``(poller, partition)`` order
        (the table keeps that order from the first call on)."""
        if not self._ordered:
            self._ordered = True
            self._order = sorted(self._rows.values(), key=_order)
            return self._order
        if self._left:
            self._order = [row for row in self._order if self._rows.get(row.key) is row]
            self._left = False
        joined, self._joined = self._joined, []
        joined = [row for row in joined if self._rows.get(row.key) is row]
        if len(joined) > len(self._order) // 8:
            self._order.extend(joined)
            self._order.sort(key=_order)
        else:
            for row in joined:
                insort(self._order, row, key=_order)
        return self._order

    def pollers(self) -> Mapping[str, PollerFigures]:
        """The sums of each poller with a key held (waiting or not)."""
        return self._pollers

    def oldest_success(self, poller: str) -> float | None:
        """The oldest last success among the poller's keys run here (``None``: none has
        succeeded yet, or none is held). The first call starts keeping a heap of the last
        successes per poller (about a microsecond a poll): a table read per key needs none."""
        if not self._oldest:
            self._oldest = True
            self._rebuild()
        sums = self._pollers.get(poller)
        if sums is None or not sums.successes:
            return None
        return sums.successes[0][0]

    # -- the sums ---------------------------------------------------------------------------

    def _poller(self, name: str) -> PollerFigures:
        sums = self._pollers.get(name)
        if sums is None:
            sums = self._pollers[name] = PollerFigures()
        return sums

    def _add(self, sums: PollerFigures, row: KeyFigures) -> None:
        if row.waiting:
            sums.waiting += 1
            return
        sums.held += 1
        sums.circuits[row.circuit] = sums.circuits.get(row.circuit, 0) + 1
        for kind, count in row.parked:
            sums.parked[kind] = sums.parked.get(kind, 0) + count
        if self._oldest and row.last_success is not None:
            self._push(sums, row.last_success, row.key)

    def _take(self, sums: PollerFigures, row: KeyFigures) -> None:
        """Take ``row`` out of the sums; its heap entry goes stale (taken off by _settle)."""
        if row.waiting:
            sums.waiting -= 1
            return
        sums.held -= 1
        sums.circuits[row.circuit] -= 1
        for kind, count in row.parked:
            left = sums.parked[kind] - count
            if left or kind in PARKED_KINDS:
                sums.parked[kind] = left
            else:
                del sums.parked[kind]  # a kind no key has any more: no series

    def _push(self, sums: PollerFigures, last_success: float, key: str) -> None:
        heapq.heappush(sums.successes, (last_success, key))
        self._heaped += 1
        self._settle(sums)
        if self._heaped > 2 * len(self._rows) + 64:
            self._rebuild()

    def _settle(self, sums: PollerFigures) -> None:
        """Take stale entries off the top of the poller's heap, so that the top holds."""
        heap, rows = sums.successes, self._rows
        while heap:
            at, key = heap[0]
            row = rows.get(key)
            if row is not None and not row.waiting and row.last_success == at:
                return
            heapq.heappop(heap)
            self._heaped -= 1

    def _rebuild(self) -> None:
        """Every heap anew from the rows: stale entries below the tops add up otherwise."""
        heaps: dict[str, list[tuple[float, str]]] = {name: [] for name in self._pollers}
        for row in self._rows.values():
            if not row.waiting and row.last_success is not None:
                heaps[row.poller].append((row.last_success, row.key))
        for name, heap in heaps.items():
            heapq.heapify(heap)
            self._pollers[name].successes = heap
        self._heaped = sum(len(heap) for heap in heaps.values())
