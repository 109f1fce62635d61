"""End-to-end throughput of the real runner: events/s from a vendor backlog to read_committed.

    python -m integration.bench.throughput [--tenants 50] [--items 2000] [--instances 1,2]
        [--commit-interval 100ms[,500ms,...]] [--pages-in-flight 1,16] [--page-delay 20ms]
        [--partitions 8] [--schedule-min 100ms] [--timeout 150] [--keep-topics]

One vendor simulator (``python -m integration.simulator``, no mutations, a quota nobody
reaches) holds ``--tenants`` x ``--items`` invoices; with ``--page-delay`` every tenant answers
each page after that delay (the simulator's ``delay`` fault). For every combination of
``--instances``, ``--commit-interval`` and ``--pages-in-flight`` (a *scenario*; the last is
written as ``runner.max.pages.in.flight.per.key``, left at its default of 16 without the
option), this script writes runner configs with a fresh topics prefix (so every scenario starts
from the initial cursor and an empty events topic), starts that many ``python -m watukuy.cli
--config ...`` processes of one group, and a read_committed consumer in this process reads
``<prefix>.events.invoices`` from its beginning. The clock starts when
the runners are launched (their start-up is included: imports, topic creation, group join,
restore) and stops when the consumer has seen ``tenants x items`` events. Reported per scenario:

- ``events/s``: tenants x items / that time, the end-to-end rate;
- ``first s``: when the first event became visible to read_committed;
- ``steady/s``: events / time from the first to the last one (start-up left out);
- ``x limit`` (with ``--page-delay``): steady/s against what the vendor allows, tenants x 100
  items / page delay (5,000/s for one tenant at 20 ms): a tenant's next-token pages can only
  be asked for one after the other;
- ``CPU s``: CPU time of the runners (summed), the simulator and the local broker (if it is the
  one in ``.watukuy/broker``) over the scenario, from ``/proc``: everything shares the machine's
  cores, so this shows who was busy; ``load`` is the 1-minute load average at the start (other
  work on the machine makes the figures noisy);
- ``check``: every tenant's sequence is 1..items in offset order, every event id is distinct,
  and nothing more arrived in the 2 s after the runners stopped (SIGTERM, exit code 0).

The default (1 and 2 instances, 100 ms) takes about a minute; ``--instances 1,2
--commit-interval 20ms,500ms,2s`` about three. Reading the figures: a key's next page is
fetched while up to ``runner.max.pages.in.flight.per.key`` earlier ones wait for their
transaction, so a long ``commit.interval`` caps a key near that many pages per interval (16 x
100 / 2 s = 800/s a key; with ``--pages-in-flight 1`` each page waits for the transaction
holding the previous one, tenants x 100 / interval: 2,500/s for 50 tenants at 2 s); below that
the runners' CPU is the limit, and two instances on one machine share its cores with each
other, the broker, the simulator and this consumer. One tenant's backlog (``--tenants 1
--items 200000 --page-delay 20ms --pages-in-flight 1,16 --instances 1 --timeout 900``) shows
how close one key comes to its vendor's limit (figures in ``RESULTS.md``, "One tenant's
backlog: pages in flight"); a tenant of more than 10,000 items is served from a sorted index
(:mod:`integration.bench.backlog`: the simulator sorts all of a tenant's items for every page).

The poller is ``integration.pollers:invoices`` (100 items a page, token cursor, at most 100
pages a poll: the default ``max_pages``, after which the key's pages in flight are all answered
before its next poll starts); its schedule is ``--schedule-min`` .. 1 s. The broker is
``$WATUKUY_BOOTSTRAP``, else the one in ``.watukuy/broker`` (started, and stopped at the end,
if it is not running). Configs and runner logs are in ``.watukuy/bench/throughput/``. The
topics of each scenario are deleted after it unless ``--keep-topics``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from integration.bench import backlog
from integration.demo import (
    ROOT,
    Simulator,
    committed_reader,
    delete_topics,
    gap_free,
    kafka_broker,
    runner_config,
    runner_env,
    signals_interrupt,
    start_runner,
    stop_process,
    wait_for_topic,
    write_config,
)
from integration.kafka import broker
from integration.pollers import page_size
from watukuy.core.events import Event
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder

BENCH_DIR = ROOT / ".watukuy" / "bench" / "throughput"
POLLER = "invoices"
SCHEDULE_MAX = "1s"

Values = list[tuple[bytes | None, bytes | None]]


@dataclass
class Scenario:
    instances: int
    commit_interval: str
    pages_in_flight: int | None = None  # runner.max.pages.in.flight.per.key; None: not written


@dataclass
class Result:
    scenario: Scenario
    expected: int
    seen: int = 0
    elapsed: float = float("nan")  # launch -> all expected events visible
    first: float = float("nan")  # launch -> first event visible
    last: float = float("nan")
    runner_cpu: float = float("nan")
    vendor_cpu: float = float("nan")
    broker_cpu: float = float("nan")
    load: float = float("nan")  # 1-minute load average when the scenario started
    limit: float | None = None  # items/s the vendor allows (--page-delay), None: no limit
    exit_codes: list[int | None] = field(default_factory=list)
    extra: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.seen >= self.expected

    @property
    def rate(self) -> float:
        return self.expected / self.elapsed if self.complete else float("nan")

    @property
    def steady(self) -> float:
        span = self.last - self.first  # too short to mean anything under a second
        return (self.seen - 1) / span if self.complete and span >= 1 else float("nan")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (``/proc/PID/stat``), ``nan`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_all(runners: list[subprocess.Popen[bytes]]) -> list[int | None]:
    """One SIGTERM each, all at once (they stop in parallel), then their exit codes."""
    for runner in runners:
        if runner.poll() is None:
            runner.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for runner in runners:
        try:
            codes.append(runner.wait(60))
        except subprocess.TimeoutExpired:
            codes.append(stop_process(runner, signal.SIGKILL, 10))
    return codes


def check(
    values: Values,
    tenants: int,
    items: int,
    decode: Callable[[bytes], Event],
) -> list[str]:
    """What is wrong with the events read (empty if nothing): per-tenant sequences 1..items in
    offset order, distinct ids, ``tenants`` keys."""
    sequences: defaultdict[str, list[int]] = defaultdict(list)
    ids: set[str] = set()
    problems = []
    for key, raw in values:
        event = decode(raw or b"")
        sequences[(key or b"").decode()].append(event.sequence)
        ids.add(event.id)
    if len(ids) != len(values):
        problems.append(f"{len(values) - len(ids)} repeated ids")
    if len(sequences) != tenants:
        problems.append(f"{len(sequences)} tenants, not {tenants}")
    broken = [key for key, seq in sequences.items() if not gap_free(seq) or len(seq) != items]
    if broken:
        problems.append(f"{len(broken)} tenants not 1..{items}, e.g. {broken[0]}")
    return problems


def run_scenario(
    bootstrap: str,
    sim: Simulator,
    scenario: Scenario,
    args: argparse.Namespace,
    broker_pid: int | None = None,
) -> Result:
    """One scenario on a fresh topics prefix, whose topics are deleted after it."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        return _measure_scenario(bootstrap, sim, scenario, args, broker_pid, prefix)
    finally:
        if not args.keep_topics:
            delete_topics(bootstrap, prefix)


def _write_configs(
    bootstrap: str, scenario: Scenario, args: argparse.Namespace, prefix: str
) -> list[Path]:
    """One runner config per instance, on ``prefix``; their logs emptied."""
    runner_keys: dict[str, Any] = {"commit.interval": scenario.commit_interval}
    if scenario.pages_in_flight is not None:
        runner_keys["max.pages.in.flight.per.key"] = scenario.pages_in_flight
    configs = []
    for n in range(1, scenario.instances + 1):
        config = runner_config(
            bootstrap,
            prefix,
            f"bench-r{n}",
            partitions=args.partitions,
            **runner_keys,
        )
        configs.append(
            write_config(
                BENCH_DIR / f"r{n}.yaml",
                config,
                "Written by python -m integration.bench.throughput",
            )
        )
        (BENCH_DIR / f"r{n}.log").write_text("")
    return configs


def _measure_scenario(
    bootstrap: str,
    sim: Simulator,
    scenario: Scenario,
    args: argparse.Namespace,
    broker_pid: int | None,
    prefix: str,
) -> Result:
    topic = f"{prefix}.events.{POLLER}"
    result = Result(scenario, expected=args.tenants * args.items, limit=args.limit)
    env = runner_env(
        sim.base_url, WATUKUY_SCHEDULE_MIN=args.schedule_min, WATUKUY_SCHEDULE_MAX=SCHEDULE_MAX
    )
    configs = _write_configs(bootstrap, scenario, args, prefix)
    logs = [BENCH_DIR / f"r{n}.log" for n in range(1, len(configs) + 1)]
    result.load = os.getloadavg()[0]
    vendor_cpu0 = process_cpu_seconds(sim.process.pid)
    broker_cpu0 = process_cpu_seconds(broker_pid) if broker_pid else float("nan")
    started = time.monotonic()
    runners = [start_runner(config, env, log) for config, log in zip(configs, logs, strict=True)]
    values: Values = []
    consumer = None
    try:
        consumer = _read(bootstrap, topic, runners, result, started, args.timeout, values)
        result.runner_cpu = sum(process_cpu_seconds(r.pid) for r in runners)
        result.vendor_cpu = process_cpu_seconds(sim.process.pid) - vendor_cpu0
        if broker_pid:
            result.broker_cpu = process_cpu_seconds(broker_pid) - broker_cpu0
    finally:
        result.exit_codes = stop_all(runners)
    if consumer is not None:
        _drain(consumer, values)
    _judge(result, values, bootstrap, prefix, args)
    return result


def _read(
    bootstrap: str,
    topic: str,
    runners: list[subprocess.Popen[bytes]],
    result: Result,
    started: float,
    timeout: float,
    values: Values,
) -> Consumer | None:
    """Read the events topic into ``values`` until the expected count, the timeout, or no
    runner is left; the consumer, still open (``None`` if the topic never appeared)."""

    def alive() -> bool:
        return any(r.poll() is None for r in runners)

    deadline = started + timeout
    partitions = wait_for_topic(bootstrap, topic, timeout, alive)
    if partitions is None:
        result.problems.append("the events topic never appeared")
        return None
    consumer = committed_reader(bootstrap, topic, partitions)
    while len(values) < result.expected and time.monotonic() < deadline and alive():
        batch = consumer.consume(num_messages=10_000, timeout=0.2)
        now = time.monotonic()
        for message in batch:
            if message.error() is None:
                values.append((message.key(), message.value()))
        if values and result.first != result.first:  # still nan
            result.first = now - started
    result.seen = len(values)
    result.last = time.monotonic() - started
    if result.complete:
        result.elapsed = result.last
    else:
        result.problems.append(f"only {len(values)} of {result.expected} events")
    return consumer


def _drain(consumer: Consumer, values: Values) -> None:
    """Whatever arrives in the 2 s after the runners stopped, then the consumer closed."""
    drain_until = time.monotonic() + 2
    while time.monotonic() < drain_until:
        for message in consumer.consume(num_messages=10_000, timeout=0.2):
            if message.error() is None:
                values.append((message.key(), message.value()))
    consumer.close()


def _judge(
    result: Result, values: Values, bootstrap: str, prefix: str, args: argparse.Namespace
) -> None:
    """The check column: events after the expected count, exit codes, sequences and ids."""
    result.extra = len(values) - result.seen
    if result.extra:
        result.problems.append(f"{result.extra} events after the expected count")
    if any(code != 0 for code in result.exit_codes):
        result.problems.append(f"runner exit codes {result.exit_codes}; see {BENCH_DIR}/r*.log")
    if values and result.complete:
        resolver = SchemaTopicResolver(bootstrap, f"{prefix}.schemas")
        try:
            decode = event_decoder(resolve=resolver)
            result.problems.extend(check(values, args.tenants, args.items, decode))
        finally:
            resolver.close()


def header(in_flight: bool = False, limited: bool = False) -> str:
    """The table's header; ``in flight`` and ``x limit`` only when those options are given."""
    return (
        f"{'instances':>9} {'commit':>7} "
        + (f"{'in flight':>9} " if in_flight else "")
        + f"{'events':>8} {'seconds':>8} {'events/s':>9} {'first s':>8} {'steady/s':>9} "
        + (f"{'x limit':>7} " if limited else "")
        + f"{'CPU s: runners':>14} {'vendor':>6} {'broker':>6} {'load':>5}  check"
    )


HEADER = header()


def row(r: Result, in_flight: bool = False) -> str:
    shown = "-" if r.scenario.pages_in_flight is None else r.scenario.pages_in_flight
    share = r.steady / r.limit if r.limit else float("nan")
    return (
        f"{r.scenario.instances:>9} {r.scenario.commit_interval:>7} "
        + (f"{shown:>9} " if in_flight else "")
        + f"{r.seen:>8} {r.elapsed:>8.1f} {r.rate:>9.0f} {r.first:>8.1f} {r.steady:>9.0f} "
        + (f"{share:>7.2f} " if r.limit else "")
        + f"{r.runner_cpu:>14.1f} {r.vendor_cpu:>6.1f} {r.broker_cpu:>6.1f} {r.load:>5.1f}  "
        + f"{'; '.join(r.problems) or 'ok'}"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tenants", type=int, default=50, help="simulated tenants (50)")
    parser.add_argument("--items", type=int, default=2000, help="invoices per tenant (2000)")
    parser.add_argument(
        "--instances", default="1,2", help="comma-separated runner counts to compare (1,2)"
    )
    parser.add_argument(
        "--commit-interval",
        default="100ms",
        help="comma-separated runner.commit.interval values to compare (100ms)",
    )
    parser.add_argument(
        "--pages-in-flight",
        default="",
        help="comma-separated runner.max.pages.in.flight.per.key values to compare "
        "(not written: the runner's default, 16)",
    )
    parser.add_argument(
        "--page-delay",
        default="0",
        help="every tenant answers each page after this delay, e.g. 20ms (0: at once)",
    )
    parser.add_argument(
        "--partitions", type=int, default=8, help="topics.partitions of every scenario (8)"
    )
    parser.add_argument(
        "--schedule-min", default="100ms", help="shortest poll interval of a tenant (100ms)"
    )
    parser.add_argument(
        "--timeout", type=float, default=150.0, help="give up on a scenario after this (150 s)"
    )
    parser.add_argument("--keep-topics", action="store_true", help="keep each scenario's topics")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    instances = [int(n) for n in args.instances.split(",") if n.strip()]
    intervals = [i.strip() for i in args.commit_interval.split(",") if i.strip()]
    in_flight = backlog.counts(args.pages_in_flight)
    args.delay = backlog.page_delay(args.page_delay)
    args.limit = backlog.vendor_limit(args.tenants, args.delay)
    scenarios = [
        Scenario(n, interval, pages)
        for interval in intervals
        for pages in in_flight
        for n in instances
    ]
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    signals_interrupt()
    results: list[Result] = []
    try:
        measure(args, scenarios, results)
    except KeyboardInterrupt:
        print("throughput: interrupted; the scenarios done so far:", file=sys.stderr)
    shown = in_flight != [None]
    print(header(shown, args.limit is not None))
    for result in results:
        print(row(result, shown))
    return 0 if results and all(not r.problems for r in results) else 1


def _describe(args: argparse.Namespace, bootstrap: str) -> str:
    line = (
        f"throughput: {args.tenants} tenants x {args.items} items = "
        f"{args.tenants * args.items} events per scenario; broker {bootstrap}; "
        f"{os.cpu_count()} CPUs; partitions {args.partitions}; "
        f"schedule {args.schedule_min}..{SCHEDULE_MAX}"
    )
    if args.limit is not None:
        line += (
            f"; page delay {args.delay * 1000:g} ms, pages of {page_size()}: "
            f"the vendor allows {args.limit:,.0f} items/s"
        )
    if args.items >= backlog.INDEXED_FROM:
        line += "; pages cut from a sorted index (integration.bench.backlog)"
    return line


def measure(args: argparse.Namespace, scenarios: list[Scenario], results: list[Result]) -> None:
    with kafka_broker("throughput") as bootstrap:
        local = broker.read_running()
        broker_pid = local.pid if local is not None and local.bootstrap == bootstrap else None
        sim = backlog.start_vendor(args.tenants, args.items, BENCH_DIR / "simulator.log")
        try:
            backlog.slow_down(sim, args.delay)
            print(_describe(args, bootstrap), flush=True)
            for scenario in scenarios:
                pages = scenario.pages_in_flight
                print(
                    f"... {scenario.instances} instance(s), commit.interval "
                    f"{scenario.commit_interval}"
                    + ("" if pages is None else f", {pages} page(s) in flight a key"),
                    file=sys.stderr,
                    flush=True,
                )
                results.append(run_scenario(bootstrap, sim, scenario, args, broker_pid))
        finally:
            sim.stop()


if __name__ == "__main__":
    sys.exit(main())
