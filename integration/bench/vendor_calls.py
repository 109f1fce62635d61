"""Vendor calls per idle tenant per hour: an adaptive schedule against a fixed 30 s timer.

    PYTHONPATH=. .venv/bin/python -m integration.bench.vendor_calls \
        [--tenants 20] [--items 5] [--hours 1] [--step 1]

One in-process engine on a :class:`MemoryStore` and a :class:`FakeClock` polls the in-process
vendor simulator (served over HTTP on loopback, its clock the same fake clock), the way the
engine tests do (``tests/engine/support.py``). The poller is the reference invoices poller: one
partition per tenant, a token cursor (follow ``next``, then keep ``resume``), identity ``id``,
version ``etag``, conditional requests (an unchanged page is a 304). Nothing changes at the
vendor: every tenant is idle.

For each schedule (``{min: 30s, max: 15m}``, which backs off while a key sees no change, and
``{min: 30s, max: 30s}``, a fixed 30 s timer), a fresh engine and simulator make the first
poll of every tenant (the initial sync, not counted), then the fake clock advances ``--hours``
of time in ``--step`` second steps with an ``engine.tick()`` after each, and the vendor's
request log is counted per tenant: requests per tenant per hour (mean, min, max), how many
were 304s, and the last interval between two polls of a tenant. No real time passes, so the
figures are exact counts of what the scheduler asks for, independent of the machine's load.
A fixed 30 s timer makes 120 requests per tenant per hour.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from dataclasses import dataclass
from typing import Any

from integration.simulator import Tenant, VendorSimulator, running_simulator
from watukuy import Engine, FakeClock, MemoryStore, define_poller

SCHEDULES: dict[str, dict[str, str]] = {
    "adaptive 30s..15m": {"min": "30s", "max": "15m"},
    "fixed 30s": {"min": "30s", "max": "30s"},
}


@dataclass
class Result:
    name: str
    tenants: int
    hours: float
    per_hour: list[float]
    not_modified: int
    requests: int
    last_interval: float  # seconds between the last two polls, median over tenants

    @property
    def mean(self) -> float:
        return statistics.fmean(self.per_hour)


def make_poller(base_url: str, sim: VendorSimulator, schedule: dict[str, str]) -> Any:
    async def fetch(ctx: Any) -> dict[str, Any]:
        tenant: Tenant = ctx.partition.data
        response = await ctx.http.get(
            f"{base_url}/{tenant.slug}/items",
            query={"cursor": ctx.cursor.value, "limit": 50},
            headers={"Authorization": f"Bearer {tenant.token}"},
        )
        body = await response.json()
        return {
            "items": body["data"],
            "cursor": body["next"] or body["resume"],
            "has_more": body["next"] is not None,
        }

    return define_poller(
        name="invoices",
        partitions=lambda: [{"key": t.id, "data": t} for t in sim.tenants],
        identity=lambda item: item["id"],
        version=lambda item: item["etag"],
        cursor={"strategy": "token", "initial": None},
        fetch=fetch,
        schedule=schedule,
    )


async def measure(name: str, schedule: dict[str, str], args: argparse.Namespace) -> Result:
    clock = FakeClock()
    sim = VendorSimulator(tenants=args.tenants, items_per_tenant=args.items, seed=3, now=clock.now)
    async with running_simulator(sim) as base_url:
        poller = make_poller(base_url, sim, schedule)
        engine = Engine([poller], store=MemoryStore(), clock=clock)
        try:
            await engine.tick()  # the initial sync: every tenant's first poll, not counted
            sim.reset_stats()
            times: dict[str, list[float]] = {t.id: [] for t in sim.tenants}
            seen = {t.id: 0 for t in sim.tenants}
            steps = round(args.hours * 3600 / args.step)
            for _ in range(steps):
                clock.advance(args.step)
                await engine.tick()
                for tenant_id in times:  # note when each tenant's new requests came
                    count = sim.request_count(tenant_id)
                    if count != seen[tenant_id]:
                        seen[tenant_id] = count
                        times[tenant_id].append(clock.now())
        finally:
            await engine.close()
        per_hour = [sim.request_count(t.id) / args.hours for t in sim.tenants]
        entries = [entry for t in sim.tenants for entry in sim.log(t.id)]
        gaps = [ts[-1] - ts[-2] for ts in times.values() if len(ts) >= 2]
        return Result(
            name=name,
            tenants=args.tenants,
            hours=args.hours,
            per_hour=per_hour,
            not_modified=sum(1 for entry in entries if entry.status == 304),
            requests=len(entries),
            last_interval=statistics.median(gaps) if gaps else float("nan"),
        )


HEADER = (
    f"{'schedule':<18} {'tenants':>7} {'calls/tenant/h':>14} {'min':>5} {'max':>5} "
    f"{'304s':>6} {'last gap s':>10} {'x fixed':>7}"
)


def row(r: Result, fixed: float) -> str:
    return (
        f"{r.name:<18} {r.tenants:>7} {r.mean:>14.1f} {min(r.per_hour):>5.0f} "
        f"{max(r.per_hour):>5.0f} {r.not_modified:>6} {r.last_interval:>10.0f} "
        f"{r.mean / fixed:>7.2f}"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.vendor_calls",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tenants", type=int, default=20, help="idle tenants (20)")
    parser.add_argument("--items", type=int, default=5, help="items per tenant (5)")
    parser.add_argument("--hours", type=float, default=1.0, help="fake hours to count over (1)")
    parser.add_argument("--step", type=float, default=1.0, help="fake seconds per tick (1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.tenants < 1 or args.hours <= 0 or args.step <= 0:
        print("vendor_calls: --tenants, --hours and --step must be positive", file=sys.stderr)
        return 2
    results = [asyncio.run(measure(name, s, args)) for name, s in SCHEDULES.items()]
    fixed = results[-1].mean
    print(f"vendor calls per idle tenant per hour, over {args.hours:g} h of fake time")
    print(HEADER)
    for result in results:
        print(row(result, fixed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
