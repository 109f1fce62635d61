"""Rolling bounces: three runners, each restarted in turn, round after round.

A bounce is a clean stop (SIGTERM: the open transaction commits, the member leaves) or a
SIGKILL (the open transaction stays open until the restarted instance's ``initTransactions``
fences and aborts it), alternating so every runner meets both over the rounds; the instance
starts again at once under the same ``runner.id`` (static membership). Early rounds wait for
the group to settle and an event of the bounced runner's keys after each bounce (the recovery
time); the last rounds bounce without settle time, so restarts land on restores and
rebalances in progress. Items change all along. Full profile: 4 rounds, >= 1,000 events per
tenant; short: 1 round on a few tenants.
"""

from __future__ import annotations

import signal
import time

from integration.faults.harness import POLLER_NAME, FaultContext, result
from integration.faults.report import Result
from integration.faults.vendor import Mutator
from watukuy.store.kafka.partitioner import partition_for

NAME = "rolling-bounces"
RUNNERS = 3


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    tenants, items, rounds = (4, 1000, 4) if full else (3, 30, 1)
    unsettled = 2 if full else 0  # the last rounds bounce without settle time
    sim = ctx.simulator(tenants, items)
    pool = ctx.pool("bounce", sim)
    # Transactions held open a moment, so a SIGKILL lands inside one (aborted records seen).
    runners = pool.start(RUNNERS, faults=["--hold-transaction", "0.2"])
    watch = ctx.watch(pool)
    keys = [f"{POLLER_NAME}/{t}" for t in sim.tenants()]
    recoveries: list[float] = []
    problems: list[str] = []
    with Mutator(sim, every=0.02 if full else 0.05):
        for round_ in range(rounds):
            settle = round_ < rounds - unsettled
            for index, runner in enumerate(runners):
                held = pool.held().get(runner.name, set())
                moved = {k for k in keys if partition_for(k, pool.partitions) in held}
                bounced_at = time.monotonic()
                if (round_ * RUNNERS + index) % 2 == 0:
                    code = runner.stop()
                    # SIGTERM before its handler is set (a restart still starting) ends it.
                    if code not in (0, -signal.SIGTERM):
                        problems.append(f"round {round_ + 1}: {runner.name} stopped with {code}")
                else:
                    runner.kill()
                runner.start()
                if settle:
                    runner.wait_started()
                    pool.wait_sharing(RUNNERS)
                    at = ctx.wait_event(watch, bounced_at, moved or None)
                    recoveries.append(at - bounced_at)
                else:
                    time.sleep(0.5)  # long enough for the process to be mid start-up
    for runner in runners:
        runner.wait_started()
    ctx.caught_up(pool, watch)
    codes = pool.stop_all()
    problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
    verdict = ctx.verify(pool)
    if full:
        few = {k: n for k, n in watch.counts().items() if n < 1000}
        problems += [
            f"{k}: only {n} events (the full profile wants >= 1,000)" for k, n in few.items()
        ]
    return result(
        NAME,
        verdict,
        rounds=rounds,
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )
