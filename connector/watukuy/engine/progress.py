"""How far each running backfill got on this instance: pages and items done, where it began.

The state keeps a backfill's cursor and its end (``until``) but not how much it has done, which
is what an operator asks while one runs. This observer counts it from the pages the engine
commits and forgets a key when its backfill ends or the key leaves this instance, so the
counts are those of the run since this instance took it over (a restart counts afresh).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watukuy.core.keys import key_text
from watukuy.core.observe import Observer
from watukuy.core.state import Lane, PartitionState


@dataclass(slots=True)
class BackfillRun:
    start: Any  # the cursor the run was at when this instance first polled it
    pages: int = 0
    items: int = 0


class LaneProgress(Observer):
    def __init__(self) -> None:
        self._runs: dict[str, BackfillRun] = {}

    def page_done(
        self, key: str, lane: Lane, cursor: Any, items: int, after: PartitionState
    ) -> None:
        """A page of ``lane`` from ``cursor`` with ``items`` items was committed."""
        if lane is not Lane.BACKFILL:
            return
        if not after.backfill.active:
            self._runs.pop(key, None)  # done: the next backfill counts from zero
            return
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = BackfillRun(start=cursor)
        run.pages += 1
        run.items += items

    def backfill(self, key: str) -> BackfillRun | None:
        return self._runs.get(key)

    def key_released(self, poller: str, partition: str, reason: str) -> None:
        self._runs.pop(key_text(poller, partition), None)
