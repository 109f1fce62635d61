"""A clock that moves only when a test moves it: ``now`` is set, or ``sleep`` adds to it (and
is recorded in ``slept``). It is the Kafka thread's ``Clock`` (``monotonic``, ``sleep``) and,
called, a plain ``() -> float`` clock."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
