"""AIMD polling schedule of one key (``poller/partition``).

A key that keeps coming back empty is polled less and less often (additive increase of the
interval, up to ``max``); a key whose data changed is polled sooner (multiplicative decrease,
down to ``min``). This is the TCP congestion-control shape: slow to relax, quick to react.

Independently of the interval, the vendor may impose a *throttle window* (Retry-After,
``RateLimit-Remaining: 0``): until ``throttle_until`` the key is never due, whatever happens
(change, manual trigger, failure backoff). Every function here keeps that invariant:
``next_due >= throttle_until``.

Everything is pure: the clock is the ``now`` argument (seconds; monotonic or epoch, as long as
the caller is consistent) and every function returns a new :class:`KeySchedule`.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

__all__ = [
    "KeySchedule",
    "ScheduleSpec",
    "after_poll",
    "backoff",
    "initial",
    "is_due",
    "phase_of",
    "resumed",
    "throttle",
    "trigger",
]

DEFAULT_STEPS = 10
"""Without an explicit ``increase``, an idle key goes from ``min`` to ``max`` in this many polls."""

BEHIND = 1.0
"""Seconds after its due time from which a poll counts as late: the runner was behind."""

ON_GRID = 1e-3
"""How far (in seconds) a due time may lie from a key's grid and count as on it: at today's
epoch seconds a float sum of intervals drifts from their product by up to a tenth of a
microsecond a poll, so a thousandth of a second holds for some ten thousand polls (then the
key's state is written, and its grid starts from there)."""


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """Bounds and AIMD parameters of a schedule, in seconds.

    ``increase`` is the additive step applied after an idle poll. It defaults to
    ``(max - min) / 10``: an idle key reaches ``max`` after ten idle polls whatever the range,
    whereas a step of ``min`` would take 3600 polls for ``min=1s, max=1h``.
    ``decrease_factor`` multiplies the interval after a poll that saw a change.
    """

    min: float
    max: float
    increase: float | None = None
    decrease_factor: float = 0.5

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min) and self.min > 0):
            raise ValueError(f"schedule min must be a positive number of seconds, got {self.min!r}")
        if not (math.isfinite(self.max) and self.max >= self.min):
            raise ValueError(f"schedule max ({self.max!r}) must be >= min ({self.min!r})")
        if self.increase is not None and not (math.isfinite(self.increase) and self.increase > 0):
            raise ValueError(f"schedule increase must be positive, got {self.increase!r}")
        if not (0 < self.decrease_factor <= 1):
            raise ValueError(
                f"schedule decrease_factor must be in (0, 1], got {self.decrease_factor!r}"
            )

    @property
    def step(self) -> float:
        """The additive increase actually applied after an idle poll."""
        if self.increase is not None:
            return self.increase
        return (self.max - self.min) / DEFAULT_STEPS

    def clamp(self, interval: float) -> float:
        """``interval`` brought into ``[min, max]`` (a restored state may predate the spec)."""
        return min(self.max, max(self.min, interval))


@dataclass(frozen=True, slots=True)
class KeySchedule:
    """Schedule state of one key: persisted with the key's state.

    ``next_due`` is when the key should be polled next; ``throttle_until`` is the end of the
    vendor-imposed window before which it must not be polled (``0.0``: none).
    """

    interval: float
    next_due: float
    throttle_until: float = 0.0


def initial(spec: ScheduleSpec, now: float) -> KeySchedule:
    """A fresh key: fastest interval, due immediately."""
    return KeySchedule(interval=spec.min, next_due=now)


def is_due(sched: KeySchedule, now: float) -> bool:
    """Whether the key may be polled at ``now``."""
    return now >= sched.next_due and now >= sched.throttle_until


def after_poll(
    spec: ScheduleSpec,
    sched: KeySchedule,
    now: float,
    changed: bool,
    *,
    late: float = 0.0,
    phase: float = 0.0,
) -> KeySchedule:
    """The schedule after a successful poll that ended at ``now``.

    Idle: ``interval + step`` capped at ``max``. Changed: ``interval * decrease_factor``
    floored at ``min``. The next poll is one interval after the time this one was due (at a
    fixed rate, like Kafka Connect's ``poll.interval``: the poll's own duration does not push
    the next one back), or one interval from ``now`` if that time is past already; never
    inside a throttle window. At a fixed rate, a key's due times stay on one grid for as long
    as its interval holds, which is what lets a store leave an idle poll unwritten
    (:func:`resumed` finds the key's place on it again).

    A poll that started more than :data:`BEHIND` ``late`` (the engine had more keys due than
    it could poll at once, or was down) comes back instead at the key's own point of the interval:
    the first time at least half an interval away that is ``phase`` (the key's fraction,
    :func:`phase_of`) of an interval past a multiple of it, like Jenkins' ``H`` in a cron
    line. Keys that a backlog served one after the other would otherwise come due again at
    exactly the engine's full pace, wave after wave, so that any slower second makes the
    rest of the wave late; on their own points, the keys of one interval come due evenly
    across it, and stay spread as long as they are polled on time. The one gap that moves a
    key to its point is between half and one and a half intervals: it comes after a poll
    that was late already, so only a runner that is behind polls a key less often than
    ``max`` says.
    """
    current = spec.clamp(sched.interval)
    interval = current * spec.decrease_factor if changed else current + spec.step
    interval = spec.clamp(interval)
    slot = sched.next_due if sched.next_due <= now else now
    due = slot + interval
    if due <= now:  # the poll outlasted its interval
        due = now + interval
    if late > BEHIND:
        offset = phase * interval
        due = offset + math.ceil((now + interval / 2 - offset) / interval) * interval
    # Made, not replaced: this runs once a poll.
    throttled = sched.throttle_until
    return KeySchedule(interval, due if due > throttled else throttled, throttled)


def resumed(sched: KeySchedule, served_until: float) -> KeySchedule:
    """A restored key's schedule, when its previous owner said it had made every poll due
    before ``served_until`` (of all its keys): a poll that changed nothing but the key's due
    time may have been left unwritten (:func:`~watukuy.core.state.only_rescheduled`), so the
    stored due time can be polls behind. It moves on by whole intervals, along the grid
    :func:`after_poll` keeps, to the first one at or after ``served_until``: none of the
    polls the owner made is made again, and none it did not make is skipped. A due time at
    or after ``served_until`` is kept as it is."""
    due, interval = sched.next_due, sched.interval
    if due >= served_until or not interval > 0:
        return sched
    # A due time a float's rounding away from ``served_until`` counts as not served: the
    # owner's sums of intervals and this product differ in their last digits.
    steps = math.ceil((served_until - ON_GRID - due) / interval)
    return replace(sched, next_due=max(due + steps * interval, sched.throttle_until))


def phase_of(key: str) -> float:
    """``key``'s point in its interval, a fraction in ``[0, 1)``: fixed per key (the same in
    every process and release, unlike ``hash``), and unrelated to the order keys come due in."""
    return zlib.crc32(key.encode()) / 2**32


def throttle(sched: KeySchedule, until: float) -> KeySchedule:
    """Forbid polling before ``until``.

    Windows only grow: a shorter window reported while a longer one is active does not shorten
    it (the longer one was the vendor's word too, and guessing wrong costs a 429).
    """
    throttle_until = max(sched.throttle_until, until)
    return replace(
        sched, throttle_until=throttle_until, next_due=max(sched.next_due, throttle_until)
    )


def trigger(sched: KeySchedule, now: float) -> KeySchedule:
    """Make the key due now (manual trigger), unless throttled: the throttle window still wins.

    The interval is kept: a trigger says nothing about how often the data changes.
    """
    return replace(sched, next_due=max(now, sched.throttle_until))


def backoff(spec: ScheduleSpec, sched: KeySchedule, now: float, delay: float) -> KeySchedule:
    """Retry after a failed poll in ``delay`` seconds (negative counts as 0).

    The caller chooses ``delay`` (exponential retry, circuit cooldown). A failure tells nothing
    about the change rate, so the interval is kept (only brought back within the spec's
    bounds); the throttle window still wins.
    """
    wait = delay if delay > 0 else 0.0
    return replace(
        sched,
        interval=spec.clamp(sched.interval),
        next_due=max(now + wait, sched.throttle_until),
    )
