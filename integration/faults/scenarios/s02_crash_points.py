"""Crash points: runners that end themselves (exit 137, as a SIGKILL) at a chosen point of a
transaction, through the fault-injecting clients of ``integration.faults.runner``.

The points: ``produce`` (records sent, more to come), ``commit`` (everything sent, the commit
not called: "during commit"), ``committed`` (the broker committed, the runner never learnt it:
"after commit") and ``dlq`` (during the commit of a transaction that writes a dead letter).
Two runners take turns through the queue of crashes; a crashed one starts again at once with
the next crash armed (its ``initTransactions`` aborts what it left open), the last ones run
unarmed. A share of every tenant's items is served poisoned (no ``id``), so dead letters are
written all along and the verifier checks the DLQ too: one letter per poisoned version. Pages
are small, so every crash meets a key with pages in flight.
Full profile: 20 crashes at each point; short: one at each.
"""

from __future__ import annotations

import random
from collections import deque

from integration.faults.crashing import take_turns
from integration.faults.harness import POLLER_NAME, FaultContext, result
from integration.faults.report import Result
from integration.faults.vendor import Mutator

NAME = "crash-points"
POINTS = ("produce", "commit", "committed", "dlq")


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    repeats = 20 if full else 1
    rng = random.Random(2)
    queue = deque(point for _ in range(repeats) for point in POINTS)
    sim = ctx.simulator(3, 40)
    for tenant in sim.tenants():
        sim.set_faults(tenant, poison_rate=0.1, poison_kinds=["malformed"])
    # Pages of 4: each tenant's 40 items are ten pages, so a transaction holds several pages
    # of a key in flight (and the pages sent after them) when a crash strikes.
    pool = ctx.pool("crash", sim, env={"WATUKUY_PAGE_SIZE": "4"})
    keys = [f"{POLLER_NAME}/{t}" for t in sim.tenants()]
    runners = [pool.add(name, faults=[]) for name in ("r1", "r2")]
    with Mutator(sim, every=0.03):
        watch, crashes, problems = take_turns(ctx, pool, runners, queue, keys, rng)
    ctx.caught_up(pool, watch)
    codes = pool.stop_all()
    problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
    recoveries = []
    for at, moved in crashes:
        first = watch.first_after(at, moved or None)
        if first is not None:
            recoveries.append(first - at)
    verdict = ctx.verify(pool, dead_letters=True)
    if not any(sim.poisoned(t) for t in sim.tenants()):
        problems.append("no item was served poisoned: the dlq point was not exercised")
    return result(
        NAME,
        verdict,
        rounds=len(crashes),
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )
