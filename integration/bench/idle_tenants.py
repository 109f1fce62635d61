"""Scheduler cost of N idle tenants: CPU, memory and poll lateness of ``Engine.run()``.

    PYTHONPATH=. .venv/bin/python -m integration.bench.idle_tenants \
        [--tenants 200,2000,10000] [--window 60] [--profile [--profile-out FILE]] \
        [--vendor indexed|stock] [--gc-freeze]

For each N, the vendor simulator runs in a separate process (3 items per tenant, a quota
nobody reaches) so its CPU is not counted; its own CPU is reported as ``vendor %``, because
a saturated vendor shows up here as lateness. ``--vendor indexed`` (the default) serves the
:class:`VendorSimulator` with an O(1) tenant lookup by slug; ``--vendor stock`` runs
``python -m integration.simulator`` as it is, whose lookup scans every tenant twice per
request (about 1 ms per request at 10,000 tenants: half a core at 333 requests/s, on a
machine shared with the engine). This process runs one engine with one poller: a partition
per tenant, cursor strategy ``none`` (a full scan: the same URL every poll, so the stored
ETag matches and the vendor answers 304, a no-change poll), schedule ``min = max = 30s``
(a steady rate of N / 30 polls per second; with ``max > min`` the idle keys would slow
down).

Phases: the initial burst (every key is due at once and gets a 200 carrying the ETag) is
timed on its own; then, over ``--window`` seconds, we measure

- CPU: ``getrusage(RUSAGE_SELF)`` user + sys over wall time, as % of one core, and the
  sys part alone (on loopback a send also runs the vendor's receive path in the kernel);
- RSS: ``VmRSS`` at the end of the window, and the peak (``ru_maxrss``);
- lateness: for every poll of the window, fetch start minus the key's due time (the
  ``next_due`` of its schedule, read from the engine when ``fetch`` starts), p50 / p99 / max;
- polls/s achieved, and how many of them were 304s;
- the vendor's CPU, the machine's load average and the CPU time the hypervisor stole: other
  processes competing for the cores show up as lateness, and stolen time inflates every CPU
  figure, so read the figures with them.

Targets for 10,000 tenants: <= 10 % of one core, <= 300 MB RSS, p99 lateness <= 1 s.

``--gc-freeze`` calls ``gc.freeze()`` once the burst is over (the engine's long-lived
objects then leave the collector's full passes), to show what a runner doing so after start-up
would gain.

Each N runs in a fresh child process of this script so RSS and CPU figures of one run are
not inflated by the previous one; ``--profile`` runs cProfile over the measured window of the
largest N and prints the top 15 entries by cumulative time, then by own time (it slows
the run: read the other figures from a run without it); ``--profile-out FILE`` also saves
the raw stats for ``python -m pstats FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from integration.simulator import Tenant, VendorSimulator, running_simulator
from watukuy import Engine, define_poller
from watukuy.http import NotModified

INTERVAL = 30.0
POLLER = "idle"


@dataclass
class Tracker:
    """What the wrapped ``fetch`` observes: lateness per poll, first polls, 304s."""

    engine: Engine | None = None
    first_polled: set[str] = field(default_factory=set)
    burst_done: asyncio.Event = field(default_factory=asyncio.Event)
    burst_end: float = 0.0
    total: int = 0
    measuring: bool = False
    lateness: list[float] = field(default_factory=list)
    window_start: float = 0.0
    late_at: list[float] = field(default_factory=list)
    """Window offsets (s) of the polls that started more than 0.5 s late."""
    polls: int = 0
    not_modified: int = 0
    errors: int = 0

    def due_of(self, key: str) -> float | None:
        """The key's scheduled time, from its state (not updated until the poll commits)."""
        assert self.engine is not None
        runtime = self.engine._roster.runtime_of(key)  # a benchmark may peek
        return None if runtime is None else runtime.state.schedule.next_due


def make_poller(base_url: str, tenants: list[dict[str, Any]], tracker: Tracker) -> Any:
    def partitions() -> list[dict[str, Any]]:
        return [{"key": t["id"], "data": t} for t in tenants]

    async def fetch(ctx: Any) -> dict[str, Any]:
        start = time.time()
        tenant = ctx.partition.data
        key = f"{ctx.poller}/{ctx.partition.key}"
        if tracker.measuring:
            due = tracker.due_of(key)
            if due is not None:
                tracker.lateness.append(start - due)
                if start - due > 0.5:
                    tracker.late_at.append(start - tracker.window_start)
            tracker.polls += 1
        try:
            response = await ctx.http.get(
                f"{base_url}/{tenant['slug']}/items",
                query={"limit": 50},
                headers={"Authorization": f"Bearer {tenant['token']}"},
            )
            body = await response.json()
        except NotModified:
            if tracker.measuring:
                tracker.not_modified += 1
            raise
        except Exception:
            if tracker.measuring:
                tracker.errors += 1
            raise
        finally:
            if key not in tracker.first_polled:
                tracker.first_polled.add(key)
                if len(tracker.first_polled) == tracker.total:
                    tracker.burst_end = time.time()
                    tracker.burst_done.set()
        return {"items": body["data"], "cursor": None, "has_more": False}

    return define_poller(
        name=POLLER,
        fetch=fetch,
        identity=lambda item: item["id"],
        version=lambda item: item["etag"],
        partitions=partitions,
        cursor={"strategy": "none"},
        schedule={"min": f"{INTERVAL:g}s", "max": f"{INTERVAL:g}s"},
    )


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sys_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def stolen_seconds() -> float:
    """CPU time the hypervisor took from this machine's cores (``steal`` in ``/proc/stat``).

    On a virtual machine whose host is busy, stolen time is also billed to whoever ran,
    so the CPU figures above are inflated by about that share; ``nan`` where unknown.
    """
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of another process (``/proc/PID/stat``), ``nan`` if unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    # after "pid (comm)": state is field 3, utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class IndexedSimulator(VendorSimulator):
    """The vendor simulator with an O(1) tenant lookup by slug (the stock one scans)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._by_slug: dict[str, Tenant] = {}
        super().__init__(*args, **kwargs)

    def tenant_by_slug(self, slug: str) -> Tenant | None:
        return self._by_slug.get(slug)

    def add_tenant(self, slug: str | None = None, items: int | None = None) -> Tenant:
        tenant = super().add_tenant(slug, items)
        self._by_slug[tenant.slug] = tenant
        return tenant

    def remove_tenant(self, tenant_id: str) -> None:
        slug = self.tenant(tenant_id).slug
        super().remove_tenant(tenant_id)
        self._by_slug.pop(slug, None)


async def serve_vendor(tenants: int) -> None:
    """``--serve-vendor``: what ``python -m integration.simulator`` does, indexed."""
    sim = IndexedSimulator(tenants, 3, quota=10**9)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with running_simulator(sim, "127.0.0.1", 0) as base_url:
        listed = [tenant.to_json() for tenant in sim.tenants]
        print(json.dumps({"base_url": base_url, "tenants": listed}), flush=True)
        await stop.wait()


def start_simulator(tenants: int, vendor: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    if vendor == "stock":
        command = [sys.executable, "-m", "integration.simulator", "--tenants", str(tenants)]
        command += ["--items", "3", "--port", "0", "--quota", str(10**9)]
    else:
        command = [sys.executable, "-m", "integration.bench.idle_tenants", "--serve-vendor"]
        command += ["--tenants", str(tenants)]
    sim = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert sim.stdout is not None
    line = sim.stdout.readline()
    if not line:
        sim.kill()
        raise RuntimeError(f"the simulator exited ({sim.wait()}) before printing its address")
    return sim, json.loads(line)


gc_pauses: list[float] = []
_gc_started = [0.0]


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        gc_pauses.append(time.perf_counter() - _gc_started[0])


async def measure(
    tenants: int,
    window: float,
    profile: bool,
    profile_out: str | None = None,
    *,
    vendor: str = "indexed",
    gc_freeze: bool = False,
) -> dict[str, Any]:
    gc.callbacks.append(_on_gc)
    sim, info = start_simulator(tenants, vendor)
    try:
        tracker = Tracker(total=tenants)
        poller = make_poller(info["base_url"], info["tenants"], tracker)
        async with Engine([poller]) as engine:
            tracker.engine = engine
            started = time.time()
            runner = asyncio.create_task(engine.run())
            try:
                await asyncio.wait_for(tracker.burst_done.wait(), timeout=max(600.0, window))
                burst = tracker.burst_end - started
                rss_after_burst = rss_mb()
                if gc_freeze:
                    gc.freeze()
                profiler = cProfile.Profile() if profile else None
                tracker.measuring = True
                vendor0, stolen0 = process_cpu_seconds(sim.pid), stolen_seconds()
                cpu0, sys0, wall0 = cpu_seconds(), sys_seconds(), time.time()
                tracker.window_start = wall0
                gc_pauses.clear()
                if profiler is not None:
                    profiler.enable()
                await asyncio.sleep(window)
                if profiler is not None:
                    profiler.disable()
                cpu1, sys1, wall1 = cpu_seconds(), sys_seconds(), time.time()
                vendor1, stolen1 = process_cpu_seconds(sim.pid), stolen_seconds()
                load = os.getloadavg()[0]
                tracker.measuring = False
            finally:
                await engine.stop()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(runner, timeout=30)
        elapsed = wall1 - wall0
        rss_end = rss_mb()
        result: dict[str, Any] = {
            "tenants": tenants,
            "burst_s": burst,
            "cpu_pct": 100 * (cpu1 - cpu0) / elapsed,
            "sys_pct": 100 * (sys1 - sys0) / elapsed,
            "vendor_cpu_pct": 100 * (vendor1 - vendor0) / elapsed,
            "rss_mb": rss_end,
            "rss_after_burst_mb": rss_after_burst,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "polls_per_s": tracker.polls / elapsed,
            "expected_per_s": tenants / INTERVAL,
            "not_modified": tracker.not_modified,
            "polls": tracker.polls,
            "errors": tracker.errors,
            "late_p50": percentile(tracker.lateness, 0.50),
            "late_p99": percentile(tracker.lateness, 0.99),
            "late_max": max(tracker.lateness, default=float("nan")),
            "late_over_half_s": len(tracker.late_at),
            "late_window_span": [min(tracker.late_at, default=0), max(tracker.late_at, default=0)],
            "gc_runs": len(gc_pauses),
            "gc_max_ms": 1000 * max(gc_pauses, default=0.0),
            "gc_total_ms": 1000 * sum(gc_pauses),
            "load_1m": load,
            "steal_pct": 100 * (stolen1 - stolen0) / elapsed,
            "cores": os.cpu_count(),
        }
        if profiler is not None:
            out = io.StringIO()
            if profile_out:
                profiler.dump_stats(profile_out)
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats("cumulative").print_stats(15)
            stats.sort_stats("tottime").print_stats(15)
            result["profile"] = out.getvalue()
        return result
    finally:
        sim.terminate()
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
            sim.wait()


HEADER = (
    f"{'tenants':>8} {'burst s':>8} {'CPU %':>7} {'sys %':>6} {'vendor %':>8} "
    f"{'RSS MB':>7} {'peak MB':>8} "
    f"{'polls/s':>8} {'want/s':>7} {'304s':>7} {'err':>4} "
    f"{'late p50':>9} {'late p99':>9} {'late max':>9}"
)


def row(r: dict[str, Any]) -> str:
    return (
        f"{r['tenants']:>8} {r['burst_s']:>8.1f} {r['cpu_pct']:>7.1f} {r['sys_pct']:>6.1f} "
        f"{r['vendor_cpu_pct']:>8.1f} {r['rss_mb']:>7.0f} "
        f"{r['peak_rss_mb']:>8.0f} {r['polls_per_s']:>8.1f} {r['expected_per_s']:>7.1f} "
        f"{r['not_modified']:>7} {r['errors']:>4} "
        f"{r['late_p50']:>8.3f}s {r['late_p99']:>8.3f}s {r['late_max']:>8.3f}s"
    )


def verdict(r: dict[str, Any]) -> str:
    checks = [
        ("CPU <= 10%", r["cpu_pct"] <= 10),
        ("RSS <= 300 MB", r["rss_mb"] <= 300),
        ("p99 lateness <= 1 s", r["late_p99"] <= 1.0),
    ]
    if not r["polls"]:
        checks[2] = ("p99 lateness: no poll in the window (make it longer than 30 s)", True)
    return ", ".join(f"{name}: {'ok' if passed else 'MISSED'}" for name, passed in checks)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.idle_tenants", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--tenants", default="200,2000,10000", help="comma-separated N values")
    parser.add_argument(
        "--window",
        type=float,
        default=60.0,
        help="measured seconds after the initial burst (60; keep it above the 30 s interval)",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the largest N")
    parser.add_argument(
        "--profile-out", metavar="FILE", help="with --profile: save the raw cProfile stats here"
    )
    parser.add_argument(
        "--vendor",
        choices=("indexed", "stock"),
        default="indexed",
        help="indexed: the simulator with an O(1) slug lookup (default); stock: as it ships",
    )
    parser.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() after the burst (see above)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-vendor", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    counts = [int(part.replace("_", "")) for part in args.tenants.split(",") if part.strip()]
    if args.serve_vendor:
        asyncio.run(serve_vendor(counts[0]))
        return 0
    if args.child:  # one N in this process: print its result as one JSON line
        result = asyncio.run(
            measure(
                counts[0],
                args.window,
                args.profile,
                args.profile_out,
                vendor=args.vendor,
                gc_freeze=args.gc_freeze,
            )
        )
        print(json.dumps(result), flush=True)
        return 0
    print(
        f"idle tenants: schedule {INTERVAL:g}s, every poll a 304 after the first; "
        f"measured window {args.window:g}s after the initial burst; vendor {args.vendor}"
        f"{'; gc.freeze() after the burst' if args.gc_freeze else ''}; pid {os.getpid()}",
        flush=True,
    )
    results = []
    for n in counts:
        command = [sys.executable, "-m", "integration.bench.idle_tenants", "--child"]
        command += ["--tenants", str(n), "--window", str(args.window), "--vendor", args.vendor]
        if args.gc_freeze:
            command.append("--gc-freeze")
        if args.profile and n == max(counts):
            command.append("--profile")
            if args.profile_out:
                command += ["--profile-out", args.profile_out]
        print(f"... {n} tenants", file=sys.stderr, flush=True)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{n} tenants: failed\n{done.stderr}", file=sys.stderr)
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(HEADER)
    for r in results:
        print(row(r))
    for r in results:
        print(f"{r['tenants']:>8}: {verdict(r)}")
    for r in results:
        first, last = r["late_window_span"]
        print(
            f"{r['tenants']:>8}: {r['late_over_half_s']} polls > 0.5 s late "
            f"(window seconds {first:.1f}..{last:.1f}); GC {r['gc_runs']} runs, "
            f"max {r['gc_max_ms']:.0f} ms, total {r['gc_total_ms']:.0f} ms; "
            f"load average {r['load_1m']:.1f} on {r['cores']} cores at the end of the window, "
            f"{r['steal_pct']:.0f}% of a core stolen by the hypervisor during it"
        )
    sys.stdout.flush()
    for r in results:
        if "profile" in r:
            print(f"\nprofile of the measured window, {r['tenants']} tenants:\n{r['profile']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
