"""The held keys' states as Prometheus families: lag, circuit, parked items, owned and waiting
keys, written at each scrape from the engine's figures (:mod:`watukuy.core.figures`).

With the ``partition`` label, each key has its lines (:mod:`.keylines`). Without it, the
lines are the pollers' sums, which the figures keep as keys change: a scrape costs the same
for ten keys or 100,000.
"""

from __future__ import annotations

from collections.abc import Callable

from watukuy.core.figures import FigureTable
from watukuy.observe.exposition import header, number, prefix
from watukuy.observe.keylines import CIRCUIT, LAG, NAMES, PARKED, STATES, KeyLines, PollerLabels

__all__ = ["KeyStates"]

OWNED = "watukuy_owned_keys"
WAITING = "watukuy_waiting_keys"


def _headers(by_key: bool) -> tuple[str, str, str, str, str]:
    return (
        header(
            LAG,
            "Seconds since the key's last successful poll"
            + ("." if by_key else " (the largest of the poller's keys)."),
            "gauge",
        ),
        header(CIRCUIT, "Keys whose circuit breaker is in each state (1 or 0 per key).", "gauge"),
        header(PARKED, "Items parked now, by kind.", "gauge"),
        header(OWNED, "Keys of the poller this instance holds.", "gauge"),
        header(
            WAITING,
            "Keys of the poller this instance owns but does not run: their stored state was "
            "written by a newer release (status UNASSIGNED).",
            "gauge",
        ),
    )


class KeyStates:
    """Writes the five families from a table; ``named`` gives a poller's labels."""

    def __init__(self, by_key: bool, named: Callable[[str], PollerLabels]) -> None:
        self.by_key = by_key
        self._named = named
        self._headers = _headers(by_key)
        self._lines = KeyLines(named) if by_key else None

    def render(self, out: list[bytes], table: FigureTable | None) -> None:
        """Add the five families to ``out`` (their headers alone before an engine is
        watched)."""
        lag, circuit, parked, owned, waiting = ([text] for text in self._headers)
        keys: tuple[list[bytes], list[bytes]] = ([], [])  # circuit's and parked's, per key
        if table is not None:
            now = table.clock.now()
            if self._lines is not None:
                self._lines.write(table, now, lag, *keys)
            self._pollers(table, now, lag, circuit, parked, owned, waiting)
        out.append("".join(lag).encode())
        for family, per_key in ((circuit, keys[0]), (parked, keys[1])):
            out.append(family[0].encode())
            out += per_key
            out.append("".join(family[1:]).encode())
        out.append("".join(owned + waiting).encode())

    def _pollers(self, table: FigureTable, now: float, *families: list[str]) -> None:
        """Per poller: its owned and waiting keys; without ``partition``, its sums."""
        lag, circuit, parked, owned, waiting = families
        sums = table.pollers()
        for poller in sorted(sums):
            named = dict(zip(NAMES, self._named(poller), strict=True))
            found = sums[poller]
            owned.append(f"{prefix(OWNED, named)}{number(float(found.held))}\n")
            waiting.append(f"{prefix(WAITING, named)}{number(float(found.waiting))}\n")
            if self.by_key or not found.held:
                continue
            oldest = table.oldest_success(poller)
            if oldest is not None:
                seconds = now - oldest
                lag.append(f"{prefix(LAG, named)}{number(max(0.0, seconds))}\n")
            for state in STATES:
                line = prefix(CIRCUIT, {**named, "state": state})
                circuit.append(f"{line}{number(float(found.circuits.get(state, 0)))}\n")
            for kind in sorted(found.parked):
                line = prefix(PARKED, {**named, "kind": kind})
                parked.append(f"{line}{number(float(found.parked[kind]))}\n")
