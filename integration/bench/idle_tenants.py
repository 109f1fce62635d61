"""Scheduler cost of N idle tenants: CPU, memory and poll lateness of ``Engine.run()``.

    PYTHONPATH=. .venv/bin/python -m integration.bench.idle_tenants \
        [--tenants 200,2000,10000] [--window 60] [--profile [--profile-out FILE]] \
        [--vendor indexed|stock] [--gc-freeze | --runner-gc] [--settle 0] \
        [--schedule-min 30s] [--schedule-max 15m]

For each N, the vendor simulator runs in a separate process (3 items per tenant, a quota
nobody reaches) so its CPU is not counted; its own CPU is reported as ``vendor %``, because
a saturated vendor shows up here as lateness. ``--vendor indexed`` (the default) serves the
:class:`VendorSimulator` with an O(1) tenant lookup by slug; ``--vendor stock`` runs
``python -m integration.simulator`` as it is, whose lookup scans every tenant twice per
request (about 1 ms per request at 10,000 tenants: half a core at 333 requests/s, on a
machine shared with the engine). This process runs one engine with one poller: a partition
per tenant, cursor strategy ``none`` (a full scan: the same URL every poll, so the stored
ETag matches and the vendor answers 304, a no-change poll), schedule ``min = max = 30s``
by default (a steady rate of N / 30 polls per second). ``--schedule-max 15m`` gives the
schedule ``30s..15m`` of issue 25: every 304 moves a key's interval up by a tenth of the range
(87 s), so a key polls at 0, 30 s, 147 s, 351 s, ... and every 15 minutes from about 70 minutes
on; the rate the schedules ask for in the window is reported beside the rate achieved
(``want/s``: every key's schedule as it stood when the window opened, played forward as if
every poll were on time and idle).

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

Targets for 10,000 tenants (issue 13): <= 10 % of one core, <= 300 MB RSS, p99 lateness
<= 1 s; for 100,000 (issue 25, schedule 30s..15m): <= 1 core, <= 2 GB RSS, p99 lateness <= 1 s.
The burst is reported on its own: its duration, CPU and the RSS after it.

``--gc-freeze`` calls ``gc.freeze()`` once the burst is over (the engine's long-lived
objects then leave the collector's full passes); ``--runner-gc`` does what the runner does
instead (its thresholds from the start, ``gc.freeze()`` 30 s after it, burst over or not).
``--settle S`` leaves S seconds after the burst out of the window: at 100,000 keys the burst
outlasts the 30 s ``min``, so the keys' second polls queue behind it and are late by about
the burst's length; the window then measures the back-off that follows instead.

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
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from integration.bench.idle_measures import (
    cpu_seconds,
    percentile,
    polls_due,
    process_cpu_seconds,
    rss_mb,
    stolen_seconds,
    sys_seconds,
)
from integration.bench.idle_vendor import start_simulator, stop_simulator
from watukuy import Engine, define_poller
from watukuy.core.durations import format_duration, parse_duration
from watukuy.core.schedule import KeySchedule, ScheduleSpec
from watukuy.http import NotModified

INTERVAL = 30.0
"""The schedule's ``min`` (and ``max`` unless ``--schedule-max`` says otherwise), seconds."""
POLLER = "idle"
TARGETS = ((10_000, 10.0, 300.0), (100_000, 100.0, 2048.0))
"""(up to N tenants, CPU % of one core, RSS MB): issue 13's target, then issue 25's."""


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
    polled_at: list[tuple[float, float]] = field(default_factory=list)
    """``(window offset, lateness)`` of every poll of the window, for the timeline."""
    polls: int = 0
    not_modified: int = 0
    errors: int = 0
    burst_errors: int = 0
    first_error: str = ""

    def due_of(self, key: str) -> float | None:
        """The key's scheduled time, from its state (not updated until the poll commits)."""
        assert self.engine is not None
        runtime = self.engine._roster.runtime_of(key)  # a benchmark may peek
        return None if runtime is None else runtime.state.schedule.next_due

    def schedules(self) -> list[KeySchedule]:
        """Every key's schedule as it stands (a poll in flight has not updated its own)."""
        assert self.engine is not None
        roster = self.engine._roster
        found = (roster.runtime_of(key) for key in self.first_polled)
        return [runtime.state.schedule for runtime in found if runtime is not None]


def make_poller(
    base_url: str, tenants: list[dict[str, Any]], tracker: Tracker, spec: ScheduleSpec
) -> Any:
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
                tracker.polled_at.append((start - tracker.window_start, start - due))
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
        except Exception as exc:
            if tracker.measuring:
                tracker.errors += 1
            elif not tracker.burst_done.is_set():
                tracker.burst_errors += 1
            tracker.first_error = tracker.first_error or repr(exc)
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
        schedule={"min": f"{spec.min:g}s", "max": f"{spec.max:g}s"},
    )


def tune_collector_as_the_runner() -> None:
    """The runner's collector settings (``watukuy.runner._tune_collector``): its thresholds
    from now on, ``gc.freeze()`` ``FREEZE_AFTER`` seconds from now, burst over or not.

    Imports the runner (and its Kafka client, about 37 MB of RSS a runner has anyway)."""
    from watukuy.runner import FREEZE_AFTER, GC_THRESHOLDS

    gc.set_threshold(*GC_THRESHOLDS)
    asyncio.get_running_loop().call_later(FREEZE_AFTER, gc.freeze)


gc_pauses: list[float] = []
_gc_started = [0.0]


gc_at: list[tuple[float, float]] = []
"""``(time.time(), seconds)`` of each collection, for the timeline."""


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        gc_pauses.append(time.perf_counter() - _gc_started[0])
        gc_at.append((time.time(), gc_pauses[-1]))


def timeline(tracker: Tracker, step: float = 10.0) -> list[dict[str, float]]:
    """Per ``step`` seconds of the window: polls, those > 0.5 s late, the worst lateness, and
    the collector's time."""
    rows: dict[int, dict[str, float]] = {}
    for at, late in tracker.polled_at:
        row = rows.setdefault(int(at // step), {"polls": 0, "late": 0, "max": 0.0, "gc_ms": 0.0})
        row["polls"] += 1
        row["late"] += late > 0.5
        row["max"] = max(row["max"], late)
    for at, seconds in gc_at:
        bucket = int((at - tracker.window_start) // step)
        if bucket in rows:
            rows[bucket]["gc_ms"] += 1000 * seconds
    return [{"from": n * step, **rows[n]} for n in sorted(rows)]


async def measure(
    tenants: int,
    window: float,
    profile: bool,
    profile_out: str | None = None,
    *,
    vendor: str = "indexed",
    gc_freeze: bool = False,
    spec: ScheduleSpec | None = None,
    runner_gc: bool = False,
    settle: float = 0.0,
) -> dict[str, Any]:
    spec = spec or ScheduleSpec(INTERVAL, INTERVAL)
    if runner_gc:
        tune_collector_as_the_runner()
    gc.callbacks.append(_on_gc)
    sim, info = start_simulator(tenants, vendor)
    try:
        tracker = Tracker(total=tenants)
        poller = make_poller(info["base_url"], info["tenants"], tracker, spec)
        async with Engine([poller]) as engine:
            tracker.engine = engine
            started, burst_cpu0 = time.time(), cpu_seconds()
            runner = asyncio.create_task(engine.run())
            try:
                await asyncio.wait_for(tracker.burst_done.wait(), timeout=max(600.0, window))
                burst = tracker.burst_end - started
                burst_cpu = cpu_seconds() - burst_cpu0
                rss_after_burst = rss_mb()
                if gc_freeze:
                    gc.freeze()
                await asyncio.sleep(settle)
                schedules = tracker.schedules()
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
                due = polls_due(schedules, spec, wall0, wall1)
            finally:
                await engine.stop()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(runner, timeout=30)
        elapsed = wall1 - wall0
        rss_end = rss_mb()
        result: dict[str, Any] = {
            "tenants": tenants,
            "schedule": [spec.min, spec.max],
            "settle_s": settle,
            "burst_s": burst,
            "burst_cpu_pct": 100 * burst_cpu / burst,
            "cpu_pct": 100 * (cpu1 - cpu0) / elapsed,
            "sys_pct": 100 * (sys1 - sys0) / elapsed,
            "vendor_cpu_pct": 100 * (vendor1 - vendor0) / elapsed,
            "rss_mb": rss_end,
            "rss_after_burst_mb": rss_after_burst,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "polls_per_s": tracker.polls / elapsed,
            "expected_per_s": due / elapsed,
            "not_modified": tracker.not_modified,
            "polls": tracker.polls,
            "errors": tracker.errors,
            "burst_errors": tracker.burst_errors,
            "first_error": tracker.first_error,
            "late_p50": percentile(tracker.lateness, 0.50),
            "late_p99": percentile(tracker.lateness, 0.99),
            "late_max": max(tracker.lateness, default=float("nan")),
            "late_over_half_s": len(tracker.late_at),
            "late_window_span": [min(tracker.late_at, default=0), max(tracker.late_at, default=0)],
            "timeline": timeline(tracker),
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
        gc.callbacks.remove(_on_gc)
        stop_simulator(sim)


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


def targets(tenants: int) -> tuple[float, float]:
    """CPU % of one core and RSS MB that ``tenants`` must stay within (:data:`TARGETS`)."""
    for most, cpu, rss in TARGETS:
        if tenants <= most:
            return cpu, rss
    return TARGETS[-1][1:]


def verdict(r: dict[str, Any]) -> str:
    cpu, rss = targets(r["tenants"])
    checks = [
        (f"CPU <= {cpu:g}%", r["cpu_pct"] <= cpu),
        (f"RSS <= {rss:g} MB", r["rss_mb"] <= rss),
        ("p99 lateness <= 1 s", r["late_p99"] <= 1.0),
    ]
    if not r["polls"]:
        checks[2] = ("p99 lateness: no poll in the window (make it longer than 30 s)", True)
    return ", ".join(f"{name}: {'ok' if passed else 'MISSED'}" for name, passed in checks)


def _duration(value: str) -> float:
    try:
        return parse_duration(value, "schedule")
    except ValueError as exc:  # ConfigError: said the argparse way
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    parser.add_argument(
        "--schedule-min", type=_duration, default=INTERVAL, help="the schedule's min (30s)"
    )
    parser.add_argument(
        "--schedule-max",
        type=_duration,
        help="the schedule's max (default: its min); 15m for issue 25's 30s..15m",
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
    parser.add_argument(
        "--runner-gc",
        action="store_true",
        help="the runner's collector settings: its thresholds, gc.freeze() 30 s after start",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds left unmeasured between the burst and the window (0)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    args.counts = [int(part.replace("_", "")) for part in args.tenants.split(",") if part.strip()]
    if args.schedule_max is None:
        args.schedule_max = args.schedule_min
    if args.schedule_max < args.schedule_min:
        parser.error("--schedule-max must not be below --schedule-min")
    args.spec = ScheduleSpec(args.schedule_min, args.schedule_max)
    return args


def child_command(args: argparse.Namespace, n: int) -> list[str]:
    """The command that measures ``n`` tenants in a fresh process."""
    command = [sys.executable, "-m", "integration.bench.idle_tenants", "--child"]
    command += ["--tenants", str(n), "--window", str(args.window), "--vendor", args.vendor]
    command += ["--schedule-min", f"{args.spec.min!r}s", "--schedule-max", f"{args.spec.max!r}s"]
    command += ["--settle", str(args.settle)]
    command += ["--gc-freeze"] * args.gc_freeze + ["--runner-gc"] * args.runner_gc
    if args.profile and n == max(args.counts):
        command.append("--profile")
        if args.profile_out:
            command += ["--profile-out", args.profile_out]
    return command


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each N in a child process of its own: their results, in order (a failed one is told)."""
    results = []
    for n in args.counts:
        print(f"... {n} tenants", file=sys.stderr, flush=True)
        done = subprocess.run(child_command(args, n), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{n} tenants: failed\n{done.stderr}", file=sys.stderr)
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def report(results: list[dict[str, Any]]) -> None:
    print(HEADER)
    for r in results:
        print(row(r))
    for r in results:
        print(f"{r['tenants']:>8}: {verdict(r)}")
    for r in results:
        print(
            f"{r['tenants']:>8}: burst (every key due at once, a 200 each) "
            f"{r['burst_s']:.1f} s, {r['tenants'] / r['burst_s']:.0f} polls/s, "
            f"{r['burst_cpu_pct']:.0f}% of a core; RSS after it {r['rss_after_burst_mb']:.0f} MB; "
            f"{r['burst_errors']} failed {r['first_error']}"
        )
    for r in results:
        print(f"{r['tenants']:>8}: window seconds: polls, > 0.5 s late, worst lateness, GC ms")
        for b in r["timeline"]:
            print(
                f"{'':>10}{b['from']:>5.0f} {b['polls']:>7.0f} {b['late']:>7.0f} "
                f"{b['max']:>8.3f} {b['gc_ms']:>7.0f}"
            )
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:  # one N in this process: print its result as one JSON line
        result = asyncio.run(
            measure(
                args.counts[0],
                args.window,
                args.profile,
                args.profile_out,
                vendor=args.vendor,
                gc_freeze=args.gc_freeze,
                spec=args.spec,
                runner_gc=args.runner_gc,
                settle=args.settle,
            )
        )
        print(json.dumps(result), flush=True)
        return 0
    spec = args.spec
    shown = format_duration(spec.min)
    if spec.max != spec.min:
        shown += f"..{format_duration(spec.max)}"
    print(
        f"idle tenants: schedule {shown}, every poll a 304 after the first; "
        f"measured window {args.window:g}s from {args.settle:g}s after the initial burst; "
        f"vendor {args.vendor}{'; gc.freeze() after the burst' if args.gc_freeze else ''}"
        f"{'; the runner collector settings' if args.runner_gc else ''}"
        f"; pid {os.getpid()}",
        flush=True,
    )
    report(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
