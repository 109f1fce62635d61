"""The series counted on every poll: a key's counters and a poller's histograms, kept as plain
numbers and written as Prometheus text at each scrape (:mod:`.exposition`).

prometheus_client's labelled children take a lock and check their arguments on each ``inc``
and ``observe`` (about 1.5 µs and 3 µs): four of them per idle poll made the metrics a tenth
of an idle runner's CPU (10,000 keys polled every 30 s, answered 304). These are bumped and
read on the event loop alone, so they need no lock.

A counter's series are grouped by the key that owns them (its labels up to the partition),
so a key that leaves takes its series with it in one step. A scrape writes each owner's lines
as pieces: the label text before its last label (the partition), that label, the label text
after it, and the number. The label text is made once per poller and kept, so a key's lines
cost their numbers and no text of their own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import islice

from watukuy.observe.exposition import Forms, escape, forms, header, number, prefix

__all__ = ["KeyCounter", "PollerHistogram"]

Labels = tuple[str, ...]
_GO_EXPONENT = 1e6  # see exposition.number: a counter is never negative, nor -inf


class KeyCounter:
    """A counter whose series are named by an owner's labels (a key's, or a poller's) and
    ``more`` labels after them (a lane, an outcome)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = list(labels)
        self._values: dict[Labels, dict[Labels, float]] = {}
        self._forms: dict[Labels, dict[Labels, Forms]] = {}  # by owner but its last label
        self._header = header(f"{name}_total", documentation, "counter").encode()
        self._text = _Lines(self._lines)
        self._moved = self._text.moved  # the same set, for inc() to reach in one step

    def inc(self, owner: Labels, more: Labels, by: float = 1.0) -> None:
        """Add ``by`` (not negative: a counter only grows) to the series ``owner + more``."""
        if by < 0:
            raise ValueError(f"{self.name}: counters only grow, got {by}")
        series = self._values.get(owner)
        if series is None:
            series = self._values[owner] = {}
        value = series.get(more)
        if value is None:
            series[more] = 0.0 + by
        elif by:
            series[more] = value + by
        else:
            return  # nothing moved (a page of no items): its lines hold
        self._moved.add(owner)

    def remove(self, owner: Labels) -> None:
        """Forget every series of ``owner``."""
        if self._values.pop(owner, None) is not None:
            self._text.remove(owner)

    def render(self, out: list[bytes]) -> None:
        """Add the family's text to ``out``: its series by owner, in the order the owners
        came (each owner's lines written again only if its numbers moved since)."""
        out.append(self._header)
        out += self._text.lines(self._values)

    def _lines(self, owner: Labels, series: dict[Labels, float]) -> bytes:
        if not owner:
            return "".join(
                f"{prefix(f'{self.name}_total', self._labels(owner, more))}{number(value)}\n"
                for more, value in series.items()
            ).encode()
        head, hole = owner[:-1], owner[-1]
        if "\\" in hole or "\n" in hole or '"' in hole:
            hole = escape(hole)
        made = self._forms.get(head)
        if made is None:
            made = self._forms[head] = {}
        text = ""
        for more, value in series.items():
            form = made.get(more)
            if form is None:
                labels = self._labels(owner, more)
                form = made[more] = forms(f"{self.name}_total", labels, self.labels[len(head)])
            shown = repr(value) if value < _GO_EXPONENT else number(value)
            text += f"{form[0]}{hole}{form[1]}{shown}\n"
        return text.encode()

    def _labels(self, owner: Labels, more: Labels) -> dict[str, str]:
        return dict(zip(self.labels, (*owner, *more), strict=True))


class _Lines:
    """Each owner's lines as last written, in the order the owners came: a scrape writes again
    only the owners whose numbers ``moved``, and the rest is a join of what it kept."""

    def __init__(self, write: Callable[[Labels, dict[Labels, float]], bytes]) -> None:
        self._write = write
        self.moved: set[Labels] = set()
        self._lines: list[bytes] = []
        self._at: dict[Labels, int] = {}
        self._gaps = 0

    def remove(self, owner: Labels) -> None:
        self.moved.discard(owner)
        at = self._at.pop(owner, None)
        if at is not None:
            self._lines[at] = b""
            self._gaps += 1

    def lines(self, values: dict[Labels, dict[Labels, float]]) -> list[bytes]:
        lines, at = self._lines, self._at
        if self._gaps > len(lines) // 2:
            lines[:] = [lines[where] for where in at.values()]  # values: in the owners' order
            self._at = at = {owner: where for where, owner in enumerate(at)}
            self._gaps = 0
        write = self._write
        moved = self.moved
        if len(moved) * 10 > len(at):
            # Many moved: in the owners' order, which is about the order their numbers lie
            # in memory. In the set's (hash) order every owner's tuple, dict and numbers are a
            # cache miss: a scrape finding 100,000 keys moved took 1.1 s instead of 0.65.
            for owner, line in at.items():
                if owner in moved:
                    lines[line] = write(owner, values[owner])
        else:
            for owner in moved:
                where = at.get(owner)
                if where is not None:
                    lines[where] = write(owner, values[owner])
        self.moved.clear()
        # The owners that came since: the last ones of ``values``, which keeps them in order.
        came = list(islice(reversed(values), len(values) - len(at)))
        for owner in reversed(came):
            at[owner] = len(lines)
            lines.append(self._write(owner, values[owner]))
        return lines


class PollerHistogram:
    """A histogram per owner (a poller's labels), with fixed bucket bounds."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        *,
        buckets: Sequence[float],
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = list(labels)
        self._bounds = (*sorted(buckets), float("inf"))
        self._names = [number(bound) for bound in self._bounds]
        # Per owner: the observations in each bucket (not cumulative), then their sum.
        self._values: dict[Labels, list[float]] = {}
        self._prefixes: dict[Labels, list[str]] = {}  # per owner: buckets', _count's, _sum's
        self._header = header(name, documentation, "histogram")

    def observe(self, owner: Labels, value: float) -> None:
        counts = self._values.get(owner)
        if counts is None:
            counts = self._values[owner] = [0.0] * (len(self._bounds) + 1)
        counts[bisect_left(self._bounds, value)] += 1  # the first bound >= value: Prometheus' le
        counts[-1] += value

    def render(self, out: list[bytes]) -> None:
        """Add the family's text to ``out``: per owner its cumulative buckets, then ``_count``
        and ``_sum``."""
        parts = [self._header]
        for owner, counts in self._values.items():
            prefixes = self._prefixes.get(owner)
            if prefixes is None:
                prefixes = self._prefixes[owner] = self._made(owner)
            cumulative = 0.0
            for before, count in zip(prefixes, counts[:-1], strict=False):  # the buckets'
                cumulative += count
                parts.append(f"{before}{number(cumulative)}\n")
            parts.append(
                f"{prefixes[-2]}{number(cumulative)}\n{prefixes[-1]}{number(counts[-1])}\n"
            )
        out.append("".join(parts).encode())

    def _made(self, owner: Labels) -> list[str]:
        labels = dict(zip(self.labels, owner, strict=True))
        made = [prefix(f"{self.name}_bucket", {**labels, "le": le}) for le in self._names]
        return [*made, prefix(f"{self.name}_count", labels), prefix(f"{self.name}_sum", labels)]
