"""A big state on one runner (issue 25): memory and idle CPU with every entry on local disk.

    PYTHONPATH=connector:. .venv/bin/python -m integration.bench.big_state --state-dir DIR \
        [--tenants 10000] [--entries 50000000] [--partitions 8] [--schedule 30s] \
        [--settle 60] [--window 120] [--scrapes 3]

One vendor simulator (``--tenants``, 2 items each) and one runner process (``watukuy-source``
with ``integration.pollers:invoices``, ``runner.state.dir`` DIR, no standbys: it is alone).
Before the runner starts, ``--entries`` snapshot entries spread evenly over the tenants' keys
are written straight into ``<prefix>.items`` with each key's state record (as
:mod:`.failover` preloads them), so the runner's cold restore puts them all on its disk.

Reported:

- ``restore``: the runner's start until every key published its first events (each key's
  first poll sees the simulator's 2 items, compared with the key's entries by point reads),
  and the records its restore read from Kafka;
- over ``--window`` seconds, ``--settle`` seconds after that: the runner's CPU (user + sys,
  % of one core, read before the closing scrape of ``/metrics``, whose own CPU is printed
  apart: from the request to its text read, with the polls since the scrape before, which
  opened the window), polls/s, and its RSS at the end and at its peak (``VmHWM``, which
  includes the restore); then the CPU of ``--scrapes`` scrapes 15 s apart; the snapshot
  entries read one by one and the whole snapshots loaded (must stay 0: no page of the window
  needs one), and the store's bytes on disk;
- the machine's speed over the window (:class:`~integration.bench.cpu.MachineSpeed`): this
  VM's speed varies by up to about twice, unseen by the load average, so a CPU figure is
  compared with another only beside it.

Targets (issue 25): 50,000,000 entries (10,000 keys x 5,000) on one runner, RSS <= 1 GB; the
idle polls of those keys within the idle target (10,000 idle keys <= 10% of a core). The
broker is ``$WATUKUY_BOOTSTRAP``, else the one in ``.watukuy/broker`` (started if not
running). The topics and this run's store are deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from integration.bench.cpu import MachineSpeed
from integration.bench.failover import (
    RESTORED,
    Visible,
    bench_poller,
    key_of,
    parse_metrics,
    preload,
    preload_records,
    say,
    scrape,
    scraped_text,
    two_item_tenants,
    wait_until,
    watch_events,
)
from integration.demo import (
    ROOT,
    Simulator,
    delete_topics,
    kafka_broker,
    runner_config,
    runner_env,
    signals_interrupt,
    start_runner,
    stop_process,
    write_config,
)
from integration.processes import free_port
from watukuy.store.kafka.topics import TopicLayout

BENCH_DIR = ROOT / ".watukuy" / "bench" / "big_state"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def memory_mb(pid: int) -> tuple[float, float]:
    """``VmRSS`` and ``VmHWM`` (the peak) of process ``pid``, in MB."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def run(args: argparse.Namespace, bootstrap: str, sim: Simulator, prefix: str) -> list[str]:
    layout = TopicLayout(prefix=prefix, partitions=args.partitions, replication_factor=1)
    tenants = [t["id"] for t in sim.tenants]
    say(f"preloading {args.entries} snapshot entries over {len(tenants)} keys ...")
    started = time.monotonic()
    records = preload_records(
        layout, bench_poller(args.schedule), tenants, args.entries, time.time()
    )
    written = preload(bootstrap, layout, records)
    preload_s = time.monotonic() - started
    say(f"preloaded {written} records in {preload_s:.1f} s")

    port = free_port()
    settings: dict[str, Any] = {"state.dir": str(args.state_dir), "standby.replicas": 0}
    config = runner_config(bootstrap, prefix, "big-r1", partitions=args.partitions, **settings)
    config["rest"] = {"listen": f"127.0.0.1:{port}"}
    path = write_config(BENCH_DIR / "runner.yaml", config, "python -m integration.bench.big_state")
    env = runner_env(
        sim.base_url, WATUKUY_SCHEDULE_MIN=args.schedule, WATUKUY_SCHEDULE_MAX=args.schedule
    )
    log = BENCH_DIR / "runner.log"
    log.write_text("")
    every = {key_of(t) for t in tenants}
    start = time.time()
    runner = start_runner(path, env, log)
    visible: Visible | None = None
    try:
        visible = watch_events(bootstrap, f"{prefix}.events.invoices", 300, str(log))
        limit = 600 + args.entries / 100_000
        first = wait_until(
            lambda: visible.all_after(every, start), limit, "every key's events", 1.0
        )
        restored = scrape(port).get(RESTORED, float("nan"))
        say(f"every key published {first - start:.1f} s after the start; measuring ...")
        time.sleep(args.settle)
        before, cpu_before, at = scrape(port), cpu_seconds(runner.pid), time.monotonic()
        with MachineSpeed() as speed:
            time.sleep(args.window)
        # The runner's CPU is read before the closing scrape: rendering /metrics for 10,000
        # keys is work of its own (reported apart), not the idle polls'.
        cpu_after, took = cpu_seconds(runner.pid), time.monotonic() - at
        text = scraped_text(port) or ""
        scrape_cpu = cpu_seconds(runner.pid) - cpu_after  # up to the text read, not parsed
        after = parse_metrics(text)
        rss, peak = memory_mb(runner.pid)
        every_15s = scrapes_apart(runner.pid, port, args.scrapes, 15.0)
        preload_events = visible.preload_events
    finally:
        if visible is not None:
            visible.close()
        stop_process(runner, signal.SIGTERM, 60)

    def gained(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    cpu = 100 * (cpu_after - cpu_before) / took
    reads = after.get("watukuy_snapshot_entry_reads_total", 0)
    loads = after.get("watukuy_snapshot_cache_loads_total", 0)
    disk_mb = after.get("watukuy_local_state_bytes", 0) / 2**20
    return [
        f"big state: {args.tenants} keys, {args.entries} entries, one runner with "
        f"runner.state.dir, schedule {args.schedule}, {args.partitions} partitions",
        f"preload written in {preload_s:.1f} s ({written} records)",
        f"restore: start -> every key's first events {first - start:.1f} s; "
        f"{restored:.0f} records read from Kafka",
        f"window {took:.0f} s ({args.settle:g} s after that): CPU {cpu:.1f}% of a core, "
        f"{gained('watukuy_polls_total') / took:.1f} polls/s; RSS {rss:.0f} MB at the end, "
        f"{peak:.0f} MB at the peak (target <= 1,024); one /metrics scrape after the window "
        f"took {scrape_cpu:.2f} s of the runner's CPU ({len(text) / 2**20:.1f} MB of text; "
        f"{gained('watukuy_polls_total'):.0f} polls since the scrape before, {took:.0f} s "
        f"earlier); then scrapes 15 s apart took "
        f"{', '.join(f'{cpu:.2f}' for cpu in every_15s) or 'none'} s",
        f"snapshot entries read one by one {reads:.0f}, whole snapshots loaded {loads:.0f}; "
        f"local state {disk_mb:.0f} MB on disk; {preload_events} events about a preloaded "
        "entry (must be 0)",
        f"machine speed over the window: the reference work took {speed.summary()} of CPU "
        "(integration/bench/cpu.py MachineSpeed; compare CPU figures only beside it)",
    ]


def scrapes_apart(pid: int, port: int, count: int, apart: float) -> list[float]:
    """The runner's CPU seconds for each of ``count`` scrapes ``apart`` seconds apart, from
    the request to the text read (a Prometheus that scrapes every ``apart`` seconds). The CPU
    the runner spends on its polls meanwhile is in it too: about 10% of a core at 10,000 idle
    keys, so 0.01 s for a scrape served in 0.1 s."""
    taken = []
    for _ in range(count):
        time.sleep(apart)
        before = cpu_seconds(pid)
        scraped_text(port)
        taken.append(cpu_seconds(pid) - before)
    return taken


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.big_state",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--state-dir", type=Path, required=True, metavar="DIR")
    parser.add_argument("--tenants", type=int, default=10_000, help="keys (10000)")
    parser.add_argument("--entries", type=int, default=50_000_000, help="entries (50000000)")
    parser.add_argument("--partitions", type=int, default=8, help="topics.partitions (8)")
    parser.add_argument("--schedule", default="30s", help="min = max (30s)")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds before the window")
    parser.add_argument("--window", type=float, default=120.0, help="seconds measured (120)")
    parser.add_argument(
        "--scrapes", type=int, default=3, help="scrapes 15 s apart after the window (3)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.tenants < 1 or args.entries < 0 or args.window <= 0:
        print("big_state: --tenants >= 1, --entries >= 0, --window > 0", file=sys.stderr)
        return 2
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    signals_interrupt()
    prefix = f"bench-big-{uuid.uuid4().hex[:8]}"
    load = os.getloadavg()[0]
    lines: list[str] = []
    with kafka_broker("big_state") as bootstrap, two_item_tenants(args.tenants, BENCH_DIR) as sim:
        try:
            lines = run(args, bootstrap, sim, prefix)
        except (TimeoutError, RuntimeError, KeyboardInterrupt) as exc:
            print(f"big_state: stopped: {exc!r}", file=sys.stderr)
        finally:
            with contextlib.suppress(Exception):
                delete_topics(bootstrap, prefix)
            shutil.rmtree(args.state_dir / prefix, ignore_errors=True)
    print("\n".join([*lines, f"load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"]))
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
