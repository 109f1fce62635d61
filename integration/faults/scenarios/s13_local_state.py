"""Local state stores under fire: two runners, each with its store (``runner.state.dir``), while
items change all along. Each round puts runner A through four faults of its store:

1. its store's directory deleted while it runs (it goes on; its next start finds nothing);
2. a SIGKILL while transactions are held open (its store is written after each commit, so
   the kill lands between a commit and its write as often as not); it restarts on its disk;
3. a stale store: A stops, B takes its keys over and publishes for a while, A restarts on the
   store it left (it reads what B wrote, from its stored offsets on);
4. a corrupt store: A stops, its store's ``CURRENT`` file is made to name a manifest that is
   not there, A restarts: the store is wiped, with one line saying why, and rebuilt.

After each restart every key must publish again, and at the end the verifier must find every
version published once, in order. A's log must show the restart of (3) reading its store and
the wipe of (4). Full profile: 3 rounds; short: 1.
"""

from __future__ import annotations

import shutil
import time

from integration.faults.harness import POLLER_NAME, FaultContext, RunnerPool, result
from integration.faults.report import Result
from integration.faults.vendor import Mutator
from integration.faults.watch import EventWatch
from integration.runners import RunnerProcess, wait_for
from watukuy.store.kafka.partitioner import partition_for

NAME = "local-state"
IN_CI = False  # CI runs tests/integration/test_local_state_kafka.py instead (CI time)

FROM_DISK = "from the local state store"  # the restore line of a store that had the partition
WIPED = "wiped: it cannot be opened"  # the line of a store that could not be opened


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    tenants, items, rounds, away = (6, 200, 3, 8.0) if full else (4, 30, 1, 3.0)
    sim = ctx.simulator(tenants, items)
    pool = ctx.pool("local", sim)
    a, _b = pool.start(2, faults=["--hold-transaction", "0.2"])
    watch = ctx.watch(pool)
    keys = [f"{POLLER_NAME}/{t}" for t in sim.tenants()]
    problems: list[str] = []
    recoveries: list[float] = []
    with Mutator(sim, every=0.05):
        for round_ in range(rounds):
            label = f"round {round_ + 1}"
            pool.wait_sharing(2)
            shutil.rmtree(pool.store_of(a.runner_id), ignore_errors=True)
            time.sleep(2.0)
            recoveries.append(_bounce(ctx, pool, a, keys, watch, kill=True))
            a.stop()
            time.sleep(away)  # B owns every key and publishes: A's store falls behind
            recoveries.append(_bounce(ctx, pool, a, keys, watch))
            if FROM_DISK not in a.since_start():
                problems.append(f"{label}: A's restart on a stale store did not read it")
            a.stop()
            (pool.store_of(a.runner_id) / "CURRENT").write_text("MANIFEST-999999\n")
            recoveries.append(_bounce(ctx, pool, a, keys, watch))
            if a.since_start().count(WIPED) != 1:
                problems.append(f"{label}: A's corrupt store was not wiped with one line")
    ctx.caught_up(pool, watch)
    codes = pool.stop_all()
    problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
    return result(
        NAME, ctx.verify(pool), rounds=rounds, recovery_s=max(recoveries), problems=problems
    )


def _bounce(
    ctx: FaultContext,
    pool: RunnerPool,
    runner: RunnerProcess,
    keys: list[str],
    watch: EventWatch,
    *,
    kill: bool = False,
) -> float:
    """(Kill and) start ``runner`` again; the seconds until one of its keys published."""
    if kill:
        runner.kill()
    started_at = time.monotonic()
    runner.start()
    runner.wait_started()
    held = pool.wait_sharing(2).get(runner.name, set())
    mine = {k for k in keys if partition_for(k, pool.partitions) in held}
    # Its keys' events count once it restored them: until the rebalance, the other runner
    # still published them (and a check of its restore's log lines would come too early).
    wait_for(
        lambda: all(f"restored partition {p}:" in runner.since_start() for p in held),
        60,
        f"{runner.name} to restore {sorted(held)}",
    )
    return ctx.wait_event(watch, time.monotonic(), mine or None) - started_at
