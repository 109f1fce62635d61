"""Each held key's lag, circuit and parked lines, for a scrape with the ``partition`` label.

100,000 keys make 600,000 such lines. Their text is kept between scrapes, in key order: a
key's circuit and parked lines are written again only when its figures' ``shape`` moves (its
circuit, its parked counts, whether it waits or ever succeeded), and the whole order only when
keys come or leave. What each scrape makes is the lags' numbers, which the time moves for every
key; formatting them (``repr``, as prometheus_client does) is most of what a scrape costs here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from watukuy.core.figures import CIRCUIT_STATES, FigureTable, KeyFigures, Parked
from watukuy.observe.exposition import Forms, escape, forms, number

__all__ = ["CIRCUIT", "LAG", "NAMES", "PARKED", "STATES", "KeyLines", "PollerLabels"]

PollerLabels = tuple[str, str, str]
NAMES = ("poller", "connector", "stream")
LAG = "watukuy_lag_seconds"
CIRCUIT = "watukuy_circuit_state"
PARKED = "watukuy_parked_items"
STATES = tuple(sorted(CIRCUIT_STATES))
_GO_EXPONENT = 1e6  # see exposition.number


class _KeyForms:
    """A poller's label text around a key's partition, for each of the key's lines."""

    def __init__(self, named: PollerLabels) -> None:
        self._labels = {**dict(zip(NAMES, named, strict=True)), "partition": ""}
        self.lag: Forms = forms(LAG, self._labels, "partition")
        self._circuit: dict[str, tuple[str, ...]] = {}
        self._parked: dict[Parked, tuple[str, ...]] = {}

    def circuit(self, state: str, partition: str) -> str:
        """The key's circuit lines: 1 for its state, 0 for the others."""
        made = self._circuit.get(state)
        if made is None:
            lines = [(CIRCUIT, "state", shown, 1 if shown == state else 0) for shown in STATES]
            made = self._circuit[state] = self._pieces(lines)
        return partition.join(made)

    def parked(self, counts: Parked, partition: str) -> str:
        made = self._parked.get(counts)
        if made is None:
            made = self._parked[counts] = self._pieces(
                [(PARKED, "kind", kind, count) for kind, count in counts]
            )
        return partition.join(made)

    def _pieces(self, lines: Iterable[tuple[str, str, str, int]]) -> tuple[str, ...]:
        """The text between the partition's places in ``lines``: ``partition.join`` of it
        writes them."""
        pieces, tail = [], ""
        for name, label, value, count in lines:
            before, after = forms(name, {**self._labels, label: value}, "partition")
            pieces.append(tail + before)
            tail = f"{after}{number(float(count))}\n"
        return (*pieces, tail)


class KeyLines:
    """The per-key lines of the table's keys, kept between scrapes; ``named`` gives a
    poller's labels."""

    def __init__(self, named: Callable[[str], PollerLabels]) -> None:
        self._named = named
        self._forms: dict[PollerLabels, _KeyForms] = {}
        self._names: dict[str, PollerLabels] = {}  # each poller's labels when last written
        self._members = self._shapes = -1  # the table's counts when last written
        self._rows: list[KeyFigures] = []  # the keys in order, as last written
        self._shape: list[int] = []  # the shape each key's lines were written from
        self._circuit: list[bytes] = []  # each key's circuit lines (none for a waiting key)
        self._parked: list[bytes] = []
        # The keys with a lag (held here, succeeded once), and their lines up to the number.
        self._lagged: list[bool] = []  # per key, whether it has a lag
        self._lagging: list[KeyFigures] = []
        self._before: list[str] = []

    def write(
        self,
        table: FigureTable,
        now: float,
        lag: list[str],
        circuit: list[bytes],
        parked: list[bytes],
    ) -> None:
        """Add each key's lines to the families' lists, in key order."""
        rows = table.rows()
        names = {poller: self._named(poller) for poller in table.pollers()}
        if table.members != self._members or names != self._names:
            self._rewrite(rows, names)
        elif table.shapes != self._shapes:
            self._reshape()
        self._members, self._shapes = table.members, table.shapes
        # max(0.0, seconds), as inspect() has it; repr(s) is floatToGoString(s) below 1e6.
        seconds = [now - (row.last_success or 0.0) for row in self._lagging]
        lag += [
            f"{before}{repr(s) if 0.0 < s < _GO_EXPONENT else _shown(s)}\n"
            for before, s in zip(self._before, seconds, strict=True)
        ]
        circuit += self._circuit
        parked += self._parked

    def _rewrite(self, rows: list[KeyFigures], names: dict[str, PollerLabels]) -> None:
        """Keys came or left (or a poller's labels moved): the order anew, keeping the lines
        of the keys whose shape held."""
        kept = {row: at for at, row in enumerate(self._rows)} if names == self._names else {}
        circuit, parked, shape = [], [], []
        for row in rows:
            at = kept.get(row)
            if at is not None and self._shape[at] == row.shape:
                circuit.append(self._circuit[at])
                parked.append(self._parked[at])
            else:
                lines = self._lines(row, names)
                circuit.append(lines[0])
                parked.append(lines[1])
            shape.append(row.shape)
        self._rows, self._names = list(rows), names
        self._circuit, self._parked, self._shape = circuit, parked, shape
        self._lags()

    def _reshape(self) -> None:
        """Some keys' shapes moved: their lines anew, and the keys with a lag if one of them
        began or stopped having one."""
        lags = False
        for at, row in enumerate(self._rows):
            if row.shape != self._shape[at]:
                self._circuit[at], self._parked[at] = self._lines(row, self._names)
                self._shape[at] = row.shape
                lags = lags or _has_lag(row) != self._lagged[at]
        if lags:
            self._lags()

    def _lines(self, row: KeyFigures, names: dict[str, PollerLabels]) -> tuple[bytes, bytes]:
        if row.waiting:
            return b"", b""  # its figures are a fresh key's, not its own
        made = self._forms_of(names[row.poller])
        partition = escape(row.partition)
        circuit = made.circuit(row.circuit, partition)
        return circuit.encode(), made.parked(row.parked, partition).encode()

    def _lags(self) -> None:
        self._lagged = [_has_lag(row) for row in self._rows]
        self._lagging = [row for row, lags in zip(self._rows, self._lagged, strict=True) if lags]
        self._before = [
            escape(row.partition).join(self._forms_of(self._names[row.poller]).lag)
            for row in self._lagging
        ]

    def _forms_of(self, named: PollerLabels) -> _KeyForms:
        made = self._forms.get(named)
        if made is None:
            made = self._forms[named] = _KeyForms(named)
        return made


def _has_lag(row: KeyFigures) -> bool:
    """Whether a key has a lag line: held here (not waiting) and succeeded once."""
    return not row.waiting and row.last_success is not None


def _shown(seconds: float) -> str:
    return number(seconds) if seconds > 0.0 else "0.0"
