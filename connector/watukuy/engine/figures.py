"""The held keys' figures for metrics (:mod:`watukuy.core.figures`), kept as the keys change.

The roster touches a key after each change that :meth:`~watukuy.engine.engine.Engine.inspect`
would show (:mod:`.changes`); :class:`HeldFigures` hears of each touch at once and puts the
key's figures, read from its runtime, into its table. An idle poll costs it about a
microsecond; a scrape then reads the table instead of inspecting every key.
"""

from __future__ import annotations

from watukuy.core.figures import FigureTable, parked_counts
from watukuy.core.lifecycle import KeyPhase
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.roster import Roster

__all__ = ["HeldFigures"]


class HeldFigures:
    """``engine.figures``: nothing until :meth:`table` is first called (an engine without
    metrics pays nothing), then the table of every held key, kept as each is touched."""

    __slots__ = ("_roster", "_table")

    def __init__(self, roster: Roster) -> None:
        self._roster = roster
        self._table: FigureTable | None = None

    def table(self) -> FigureTable:
        if self._table is None:
            self._table = FigureTable(self._roster.clock)
            for runtime in self._roster.held():
                self._put(self._table, runtime)
            self._roster.changes.follow(self)
        return self._table

    def touch(self, key: str) -> None:
        table = self._table
        if table is None:
            return
        runtime = self._roster.runtime_of(key)
        if runtime is None:
            table.drop(key)
        else:
            self._put(table, runtime)

    @staticmethod
    def _put(table: FigureTable, runtime: KeyRuntime) -> None:
        state = runtime.state
        parked = runtime.parked
        table.put(
            runtime.key,
            state.poller,
            state.partition,
            state.last_success,
            state.circuit.state.value,
            parked_counts([item.kind for item in parked.values()] if parked else ()),
            runtime.phase is KeyPhase.WAITING_NEWER,
        )
