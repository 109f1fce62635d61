"""Cold restart after compaction, with removed tenants.

The runners' internal topics are set to compact within seconds (``compact_often``). Items
change while the runners publish; then every runner stops, some tenants are removed from the
vendor, and the log cleaner is given time until it has provably compacted the state and
snapshot topics (a range of offsets read before holds fewer records now). The runners start
again from nothing but those compacted topics: every remaining tenant must resume exactly
where it stopped (no version published again, sequences going on without a gap, the changes
made since arriving once), and the removed tenants must stay gone (not one event more).
Full profile: 3 cycles of 12 tenants; short: one cycle of 5.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from integration.faults.harness import POLLER_NAME, FaultContext, RunnerPool, result
from integration.faults.report import Result
from integration.faults.topics import compact_often, read_raw
from integration.faults.vendor import Mutator
from integration.runners import wait_for

NAME = "cold-restart"


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    cycles, tenants, busy = (3, 12, 10.0) if full else (1, 5, 3.0)
    sim = ctx.simulator(tenants, 30)
    pool = ctx.pool("cold", sim)
    runners = pool.start(2)
    compacted = [f"{pool.prefix}.state", f"{pool.prefix}.items"]
    compact_often(pool.bootstrap, compacted)
    watch = ctx.watch(pool)
    problems: list[str] = []
    recoveries: list[float] = []
    removed: list[str] = []
    for cycle in range(cycles):
        live = [t for t in sim.tenants() if t not in removed]
        with Mutator(sim, every=0.02, tenants=live, seed=cycle):
            time.sleep(busy)
            mark = ends(pool, compacted)
            before = count_below(pool, compacted, mark)
            time.sleep(2.5)  # more writes: the segments holding the mark roll and get dirty
        ctx.caught_up(pool, watch)
        codes = pool.stop_all()
        problems += [f"cycle {cycle + 1}: {n} exited with {c}" for n, c in codes.items() if c]
        gone = live[:2]
        for tenant in gone:
            sim.remove_tenant(tenant)
        removed += gone
        counts = watch.counts()
        published = {t: counts.get(f"{POLLER_NAME}/{t}", 0) for t in removed}

        def cleaned(mark: dict[tuple[str, int], int] = mark, before: int = before) -> bool:
            return count_below(pool, compacted, mark) < before

        try:
            wait_for(
                cleaned,
                60,
                "the log cleaner to compact the state and snapshot topics",
                step=1.0,
            )
        except TimeoutError as exc:
            problems.append(f"cycle {cycle + 1}: {exc}")
        restarted_at = time.monotonic()
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.wait_started()
        pool.wait_sharing(len(runners))
        with Mutator(sim, every=0.05, tenants=[t for t in live if t not in gone], seed=99):
            recoveries.append(ctx.wait_event(watch, restarted_at) - restarted_at)
            time.sleep(1.0)
        ctx.caught_up(pool, watch)
        counts = watch.counts()
        for tenant, count in published.items():
            now = counts.get(f"{POLLER_NAME}/{tenant}", 0)
            if now != count:
                problems.append(f"removed tenant {tenant}: {now - count} event(s) after removal")
    codes = pool.stop_all()
    problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
    verdict = ctx.verify(pool)
    return result(
        NAME,
        verdict,
        rounds=cycles,
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )


def ends(pool: RunnerPool, topics: Sequence[str]) -> dict[tuple[str, int], int]:
    """The offset after the last record of each partition of ``topics`` (committed or not)."""
    out: dict[tuple[str, int], int] = {}
    for r in read_raw(pool.bootstrap, topics, committed=False):
        out[(r.topic, r.partition)] = max(out.get((r.topic, r.partition), 0), r.offset + 1)
    return out


def count_below(pool: RunnerPool, topics: Sequence[str], mark: dict[tuple[str, int], int]) -> int:
    """Records below ``mark`` still there: fewer than before once the cleaner compacted."""
    records = read_raw(pool.bootstrap, topics, committed=False)
    return sum(1 for r in records if r.offset < mark.get((r.topic, r.partition), 0))
