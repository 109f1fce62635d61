"""Where a runner's start-up time went: the steps from the process start to its first polls.

Every start pays it (a rolling upgrade, a scale-out, a failover's replacement), so the runner
logs it, from the moment the operating system started the process:

- at ``runner started``: the steps so far (the interpreter and imports, the config, the topics,
  the Kafka clients, the control topics, REST, and the group's assignment and restore if they
  came before);
- at the first poll, and at the first events committed: what came since.

The steps are marked where they end (:func:`mark`), on whichever thread: one timeline per
process, since the process start is what it measures from. A step marked again keeps its first
time. :class:`StartupObserver` marks what the engine and the store report (the assignment, the
last restore of it, the first poll and the first commit) and writes the lines.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping

from watukuy.core.observe import Observer, OutcomeKind

__all__ = ["PROCESS", "StartupObserver", "Timeline", "mark", "process_age", "show"]

log = logging.getLogger("watukuy.runner")


def process_age() -> float | None:
    """Seconds since the operating system started this process (Linux: its start time in
    ``/proc/self/stat``, in clock ticks since boot, against ``CLOCK_BOOTTIME``; resolution a
    tick, 10 ms); ``None`` where that cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        ticks = int(fields[19])  # field 22 of the whole line: starttime
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Timeline:
    """Steps and when they ended, from ``origin`` (monotonic seconds): by default, the
    process start (or, where that cannot be read, this timeline's creation)."""

    def __init__(self, origin: float | None = None) -> None:
        now = time.monotonic()
        age = process_age() if origin is None else now - origin
        self.exact = age is not None  # whether the origin is the process start
        self.origin = now - age if age is not None and 0 <= age < 3600 else now
        self._steps: dict[str, float] = {}
        self._shown: set[str] = set()
        self._lock = threading.Lock()  # marked on the Kafka thread too

    def mark(self, step: str) -> None:
        """``step`` ended now (kept once: the first time counts)."""
        at = time.monotonic()
        with self._lock:
            self._steps.setdefault(step, at)

    def show(self, title: str) -> None:
        """Log the steps not logged yet, in the order they ended, each with its seconds since
        the origin."""
        with self._lock:
            new = [(s, at - self.origin) for s, at in self._steps.items() if s not in self._shown]
            self._shown.update(s for s, _ in new)
        if not new:
            return
        new.sort(key=lambda pair: pair[1])
        origin = "the process started" if self.exact else "watukuy was first imported"
        listed = ", ".join(f"{step} {seconds:.3f}" for step, seconds in new)
        log.info("start-up, %s; seconds since %s: %s", title, origin, listed)


PROCESS = Timeline()
"""This process' timeline: the runner's steps are marked here."""


def mark(step: str) -> None:
    """``step`` of this process' start-up ended now (:meth:`Timeline.mark`)."""
    PROCESS.mark(step)


def show(title: str) -> None:
    """Log what this process' start-up did since the last line (:meth:`Timeline.show`)."""
    PROCESS.show(title)


class StartupObserver(Observer):
    """Marks the assignment, its restore, the first poll and the first commit, and logs the
    timeline once at each of the last two (the runner logs it at ``runner started``)."""

    def __init__(self, timeline: Timeline = PROCESS) -> None:
        self._timeline = timeline
        self._restoring: set[int] | None = None  # the first assignment's, until all restored
        self._polled = False
        self._committed = False

    def leases_gained(self, kafka_partitions: tuple[int, ...]) -> None:
        if self._restoring is None:
            self._restoring = set(kafka_partitions)
            self._timeline.mark("group joined (assigned)")

    def restore_done(self, kafka_partition: int, keys: int, records: int, seconds: float) -> None:
        restoring = self._restoring
        if restoring:
            restoring.discard(kafka_partition)
            if not restoring:
                self._timeline.mark("restored")

    def poll_decided(
        self, poller: str, partition: str, lane: str, kind: OutcomeKind, seconds: float
    ) -> None:
        if not self._polled:
            self._polled = True
            self._timeline.mark("first poll decided")
            self._timeline.show("first poll")

    def events_committed(
        self, poller: str, partition: str, lane: str, counts: Mapping[str, int]
    ) -> None:
        if not self._committed:
            self._committed = True
            self._timeline.mark("first events committed")
            self._timeline.show("first events committed")
