"""A clock for the Kafka thread's parts (``watukuy.store.kafka.factory.Clock``) that moves only
when a test moves it: ``now`` is set, or ``sleep`` adds to it."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
