"""Runners that take turns through a queue of crash points (``integration.faults.runner``'s
``--crash-at POINT --after N``): a crashed one starts again at once with the next crash armed
(its ``initTransactions`` aborts what it left open); once the queue is empty they run unarmed.
Shared by the scenarios whose runners crash at chosen points of a transaction."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Sequence

from integration.faults.harness import FaultContext, RunnerPool
from integration.faults.watch import EventWatch
from integration.runners import RunnerProcess
from watukuy.store.kafka.partitioner import partition_for

__all__ = ["CRASH_EXIT", "STRIKE_TIMEOUT", "take_turns"]

CRASH_EXIT = 137
STRIKE_TIMEOUT = 60.0  # a crash point that has not struck by then is a problem of its own


def take_turns(
    ctx: FaultContext,
    pool: RunnerPool,
    runners: Sequence[RunnerProcess],
    queue: deque[str],
    keys: Sequence[str],
    rng: random.Random,
) -> tuple[EventWatch, list[tuple[float, set[str]]], list[str]]:
    """Start ``runners`` and crash them through ``queue``; return the pool's event watch, each
    crash (when, the keys its runner held) and the problems seen (a crash that never struck,
    an exit that was not a crash). Every runner is running and the pool sharing at the end."""
    armed: dict[str, tuple[str, float]] = {}  # runner -> (point, started at)
    crashes: list[tuple[float, set[str]]] = []
    problems: list[str] = []

    def arm_and_start(runner: RunnerProcess) -> None:
        if queue:
            point = queue.popleft()
            runner.arm(["--crash-at", point, "--after", str(rng.randint(1, 3))])
            armed[runner.name] = (point, time.monotonic())
        else:
            runner.arm([])
            armed.pop(runner.name, None)
        runner.start()

    for runner in runners:
        arm_and_start(runner)
    watch = ctx.watch(pool)
    while armed:
        for runner in runners:
            if runner.name not in armed:
                continue
            point, since = armed[runner.name]
            if not runner.running:
                held = pool.held().get(runner.name, set())
                moved = {k for k in keys if partition_for(k, pool.partitions) in held}
                crashes.append((time.monotonic(), moved))
                code = runner.wait(5)
                if code != CRASH_EXIT:
                    problems.append(f"{runner.name} armed at {point} exited with {code}")
                arm_and_start(runner)
            elif time.monotonic() - since > STRIKE_TIMEOUT:
                problems.append(f"{runner.name}: the crash at {point} never struck")
                runner.stop()
                arm_and_start(runner)
        time.sleep(0.1)
    for runner in runners:
        runner.wait_started()
    pool.wait_sharing(len(runners))
    return watch, crashes, problems
