"""Crash points meet a stepped backfill (issue 44): the declarative poller reads the simulator's
Stripe-style ``/v1/charges`` in windows of at most 31 days, from 1,200 days back, with pages of
4, while items change; runners crash at ``produce``, ``commit`` and ``committed`` (the points
of ``crash-points``) in the middle of the backfill and take over each other's keys.

Each window commits on its own, the cursor at its end; a window whose transaction was lost
is read again by the next owner, never skipped. The verifier checks that every version served
has exactly one event and that the final versions all arrived, and the vendor's log that the
windows each tenant was asked tile the span from the first start to now, without a gap.
Full profile: 5 crashes at each point; short: one at each.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from integration.faults.crashing import take_turns
from integration.faults.harness import POLLER_NAME, FaultContext, result
from integration.faults.report import Result
from integration.faults.scenarios.declarative import declarative_pool, invoices
from integration.faults.vendor import Mutator, Simulator

NAME = "backfill-crashes"
IN_CI = False  # CI runs tests/integration/test_windows_runner.py's kill instead (CI time)
POINTS = ("produce", "commit", "committed")
SPAN = 31 * 86_400


def charges() -> dict[str, Any]:
    """``config/windows.yaml``'s charges stream as the pool's poller, polled often."""
    return invoices(
        request={
            "url": "${env:WATUKUY_VENDOR_URL}/{partition.data.slug}/v1/charges",
            "query": {"limit": 4},
            "timeout": "5s",
            "auth": {"bearer": "{partition.data.token}"},
        },
        paginate={"next_token": {"path": "next_page", "param": "page"}},
        cursor={
            "timestamp": {
                "field": "updated",
                "field_format": "epoch",
                "param": "created[gte]",
                "end_param": "created[lt]",
                "format": "epoch",
                "step": "31d",
                "start": "1200d",
                "end": "now-1s",
            }
        },
        schema=None,
    )


def gaps(sim: Simulator, tenant: str) -> list[str]:
    """Where the windows the vendor answered for ``tenant`` leave a gap, or are too long."""
    asked = sorted(
        {
            (int(entry["query"]["created[gte]"]), int(entry["query"]["created[lt]"]))
            for entry in sim.log(tenant)
            if entry["path"].endswith("/v1/charges")
            and "page" not in entry["query"]
            and entry["status"] == 200
        }
    )
    found = [f"{tenant}: a window of {end - start} s" for start, end in asked if end - start > SPAN]
    reached = asked[0][1] if asked else 0  # the furthest end asked so far
    for start, end in asked[1:]:
        if start > reached:
            found.append(f"{tenant}: nothing asked between {reached} and {start}")
        reached = max(reached, end)
    if len(asked) < 30:
        found.append(f"{tenant}: {len(asked)} windows; a backfill of 1,200 days takes 39")
    return found


def run(ctx: FaultContext, profile: str) -> Result:
    repeats = 5 if profile == "full" else 1
    rng = random.Random(15)
    queue = deque(point for _ in range(repeats) for point in POINTS)
    sim = ctx.simulator(3, 40)
    with declarative_pool(ctx, "backfill", sim, poller=charges()) as pool:
        keys = [f"{POLLER_NAME}/{t}" for t in sim.tenants()]
        runners = [pool.add(name, faults=[]) for name in ("r1", "r2")]
        with Mutator(sim, every=0.05):
            watch, crashes, problems = take_turns(ctx, pool, runners, queue, keys, rng)
        ctx.caught_up(pool, watch)
        codes = pool.stop_all()
        problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
        recoveries = []
        for at, moved in crashes:
            first = watch.first_after(at, moved or None)
            if first is not None:
                recoveries.append(first - at)
        for tenant in sim.tenants():
            problems += gaps(sim, tenant)
        verdict = ctx.verify(pool)
    return result(
        NAME,
        verdict,
        rounds=len(crashes),
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )
