"""Start-up (issue 42): a runner process from its start to its first events, step by step.

    PYTHONPATH=connector:. .venv/bin/python -m integration.bench.startup \
        [--tenants 1] [--runs 3] [--partitions 8] [--base DIR] [--declarative]
        [--topics-exist] [--max-concurrency N]

Per run: a fresh vendor simulator (``--tenants`` of 2 items each, a quota nobody reaches), a
fresh topics prefix (so the runner creates its topics, joins an empty group and restores empty
partitions, as a new deployment does; with ``--topics-exist`` the topics are made before the
runner starts, as for a deployment's next runner), and one runner process (``python -m watukuy.cli
--config ...``, the Python poller ``integration.pollers:invoices`` or with ``--declarative``
the declarative one of ``config/invoices.yaml`` (its budget raised out of the way), schedule
30 s so that each key is polled once in the run). The run ends when every key's first events
are readable.

Reported per run, in seconds from the process start:

- the runner's own timeline: the ``start-up, ...`` lines of its log (``watukuy.observe.
  startup``: each step where it ended, from the process start the kernel recorded);
- from its log lines as they were before that timeline existed: the assignment (``assigned``),
  the last partition restored and ``runner started``;
- from the outside: the vendor's first request of a tenant and the first request of the last
  tenant (the simulator's ``/_admin/first-requests``, polled every 0.1 s: when every key was
  polled once), the first event readable by a read_committed consumer and the last key's first
  event readable; and the runner's and the simulator's CPU seconds by then (the machine is
  shared: where the wall times swing with the load, the CPU says what the work was).

Both codes' modules are compiled first (``compileall``), as a pip-installed package's are: a
checkout run with ``PYTHONDONTWRITEBYTECODE`` would compile every module at every start.

``--base DIR`` runs the code of another worktree (its ``connector`` directory first on the
runner's ``PYTHONPATH``) in alternate runs, base first, for a side-by-side on a shared machine;
the summary gives each figure's range per code. Targets (issue 42): the first event <= 1.0 s
after the process start (empty state; the broker's ``group.initial.rebalance.delay.ms`` 0, as
``integration/kafka/broker.py`` sets it), and with ``--tenants 10000`` every key polled <= 5 s
after it. The broker is ``$WATUKUY_BOOTSTRAP``, else the one in ``.watukuy/broker`` (started
if not running). Configs and logs are in ``.watukuy/bench/startup/``; topics are deleted.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from integration.bench.big_state import cpu_seconds, memory_mb
from integration.bench.failover import Visible, key_of, two_item_tenants, wait_until
from integration.demo import (
    ROOT,
    delete_topics,
    example_config,
    kafka_broker,
    runner_config,
    runner_env,
    signals_interrupt,
    start_runner,
    stop_process,
    wait_for_topic,
    write_config,
)
from watukuy.store.kafka.offsets import OFFSET_END, offsets_now
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

BENCH_DIR = ROOT / ".watukuy" / "bench" / "startup"
SCHEDULE = "30s"
TIMELINE = re.compile(r"start-up, [^;]*; seconds since [^:]*: (?P<steps>.*?\d)(?: \w+=\S+)*$")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) ")
# Log lines every version has: (what, pattern; the last matching line counts for "restored").
LOG_LINES = (
    ("log: assigned", re.compile(r" assigned \S+ partition\(s\)"), False),
    ("log: last partition restored", re.compile(r" restored partition \d+:"), True),
    ("log: runner started", re.compile(r" runner \S+ started:"), False),
)
OUTSIDE = (
    "vendor: first tenant's first request",
    "vendor: every tenant requested",
    "Kafka: first event readable",
    "Kafka: every key's first event readable",
)


@dataclass
class Run:
    code: str
    load: float
    steps: dict[str, float] = field(default_factory=dict)
    cpu: float = float("nan")
    vendor_cpu: float = float("nan")
    peak_mb: float = float("nan")


class FirstRequests:
    """Polls the simulator's ``/_admin/first-requests`` until every tenant had one."""

    def __init__(self, base_url: str) -> None:
        self._url = f"{base_url}/_admin/first-requests"
        self.last: dict[str, float | int | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(self._url, timeout=10) as response:
                    self.last = json.loads(response.read())
                if self.done:
                    return

    @property
    def done(self) -> bool:
        last = self.last
        return bool(last) and last.get("requested") == last.get("tenants")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def runner_alive(runner: subprocess.Popen[bytes]) -> Callable[[], bool]:
    return lambda: runner.poll() is None


def runner_steps(log_text: str, started: float) -> dict[str, float]:
    """The runner's own timeline, and its older log lines' times since ``started`` (Unix)."""
    steps: dict[str, float] = {}
    for line in log_text.splitlines():
        timeline = TIMELINE.search(line)
        if timeline is not None:
            for part in timeline["steps"].split(", "):
                name, _, seconds = part.rpartition(" ")
                steps[name] = float(seconds)
            continue
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        at = datetime.fromisoformat(stamp[1].replace("Z", "+00:00")).timestamp() - started
        for name, pattern, last in LOG_LINES:
            if pattern.search(line) and (last or name not in steps):
                steps[name] = at
    return steps


def make_topics(bootstrap: str, layout: TopicLayout) -> None:
    """The runner's topics, as its own check creates them, with their leaders: a deployment's
    topics before one of its runners starts (a rolling upgrade, a scale-out)."""
    made = ensure_topics(
        AdminClient({"bootstrap.servers": bootstrap}), layout, [("invoices", None)]
    )
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watukuy-bench-startup"})
    wanted = [(t.name, p) for t in made.values() for p in range(t.partitions)]

    def led() -> bool:
        try:
            return not offsets_now(consumer, wanted, OFFSET_END, 10).errors
        except KafkaException:  # no leader yet: asked again
            return False

    try:
        wait_until(led, 60, "the topics' leaders")
    finally:
        consumer.close()


def one_run(args: argparse.Namespace, bootstrap: str, code: str, base: Path | None) -> Run:
    """One runner started on fresh topics until every key's first events are readable."""
    prefix = f"bench-startup-{uuid.uuid4().hex[:8]}"
    run = Run(code, os.getloadavg()[0])
    with two_item_tenants(args.tenants, BENCH_DIR) as sim:
        example = None
        if args.declarative:  # config/invoices.yaml, its budget out of the way
            example = example_config({"min": SCHEDULE, "max": SCHEDULE})
            example["budgets"] = {"vendor": {"rate": "100000/s", "burst": 100000}}
        settings: dict[str, object] = {}
        if args.max_concurrency is not None:
            settings["max.concurrency"] = args.max_concurrency
        config = runner_config(
            bootstrap, prefix, "startup-r1", partitions=args.partitions, example=example, **settings
        )
        path = write_config(BENCH_DIR / "runner.yaml", config, "integration.bench.startup")
        if args.topics_exist:
            make_topics(bootstrap, TopicLayout(prefix, args.partitions, 1))
        env = runner_env(sim.base_url, WATUKUY_SCHEDULE_MIN=SCHEDULE, WATUKUY_SCHEDULE_MAX=SCHEDULE)
        if base is not None:  # the base's watukuy first; integration.pollers from here
            env["PYTHONPATH"] = os.pathsep.join([str(base / "connector"), env["PYTHONPATH"]])
        log = BENCH_DIR / f"runner-{code}.log"
        log.write_text("")
        keys = {key_of(t["id"]) for t in sim.tenants}
        requests = FirstRequests(sim.base_url)
        vendor_cpu = cpu_seconds(sim.process.pid)
        started = time.time()
        runner = start_runner(path, env, log)
        visible: Visible | None = None
        try:
            topic = f"{prefix}.events.invoices"
            partitions = wait_for_topic(bootstrap, topic, 60, runner_alive(runner), step=0.02)
            if partitions is None:
                raise RuntimeError(f"{topic} never appeared; see {log}")
            visible = Visible(bootstrap, topic, partitions, timing=True)
            seen = visible
            every = wait_until(lambda: seen.all_after(keys, started), 300, "every key's events")
            run.cpu = cpu_seconds(runner.pid)
            run.vendor_cpu = cpu_seconds(sim.process.pid) - vendor_cpu
            run.peak_mb = memory_mb(runner.pid)[1]
            wait_until(lambda: requests.done, 30, "every tenant's first request")
            first = visible.first_after(keys, started)
        finally:
            requests.close()
            if visible is not None:
                visible.close()
            stop_process(runner, signal.SIGTERM, 60)
            with contextlib.suppress(Exception):
                delete_topics(bootstrap, prefix)
        run.steps = runner_steps(log.read_text(errors="replace"), started)
        outside = (requests.last["earliest"], requests.last["latest"], first, every)
        for name, at in zip(OUTSIDE, outside, strict=True):
            if isinstance(at, int | float):
                run.steps[name] = at - started
    return run


def report(runs: list[Run], args: argparse.Namespace) -> list[str]:
    """Every step's time per run (in the order of the first run that has it), then the range
    of each per code."""
    names: list[str] = []
    for run in runs:
        steps = run.steps
        ordered = sorted(steps, key=lambda n: (n in OUTSIDE, n.startswith("log:"), steps[n]))
        names.extend(n for n in ordered if n not in names)
    width = max(len(n) for n in names) if names else 10
    header = " ".join(f"{r.code:>7}" for r in runs)
    lines = [
        f"start-up: {args.tenants} tenant(s) of 2 items, {args.partitions} partitions, "
        f"{'declarative' if args.declarative else 'Python'} poller, "
        f"seconds from the process start; runs in the order run",
        f"{'step':<{width}} {header}",
    ]
    for name in names:
        cells = " ".join(_cell(r.steps.get(name)) for r in runs)
        lines.append(f"{name:<{width}} {cells}")
    figures: dict[str, Callable[[Run], float]] = {
        "runner CPU s by then": lambda r: r.cpu,
        "vendor CPU s by then": lambda r: r.vendor_cpu,
        "runner peak RSS MB": lambda r: r.peak_mb,
        "load at its start": lambda r: r.load,
    }
    for label, value in figures.items():
        lines.append(f"{label:<{width}} " + " ".join(_cell(value(r)) for r in runs))
    codes = list(dict.fromkeys(r.code for r in runs))
    lines.append("")
    lines.append(f"{'range (min-max)':<{width}} " + " ".join(f"{c:>13}" for c in codes))
    cpus: dict[str, Callable[[Run], float]] = {
        "runner CPU s": lambda r: r.cpu,
        "vendor CPU s": lambda r: r.vendor_cpu,
    }
    for name in [*names, *cpus]:
        ranges: list[str] = []
        for code in codes:
            values = [
                cpus[name](r) if name in cpus else r.steps.get(name) for r in runs if r.code == code
            ]
            got = [v for v in values if v is not None and v == v]
            ranges.append(f"{min(got):6.2f}-{max(got):<6.2f}" if got else f"{'-':>13}")
        lines.append(f"{name:<{width}} " + " ".join(ranges))
    return lines


def _cell(value: float | None) -> str:
    return f"{value:7.3f}" if value is not None and value == value else f"{'-':>7}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.startup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tenants", type=int, default=1, help="keys (1)")
    parser.add_argument("--runs", type=int, default=3, help="runs per code (3)")
    parser.add_argument("--partitions", type=int, default=8, help="topics.partitions (8)")
    parser.add_argument("--base", type=Path, help="a worktree of the base code, run alternately")
    parser.add_argument("--max-concurrency", type=int, help="runner.max.concurrency")
    parser.add_argument(
        "--topics-exist",
        action="store_true",
        help="make the topics before the runner starts (a deployment's next runner)",
    )
    parser.add_argument(
        "--declarative",
        action="store_true",
        help="the declarative poller of config/invoices.yaml instead of the Python one",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.tenants < 1 or args.runs < 1:
        print("startup: --tenants >= 1, --runs >= 1", file=sys.stderr)
        return 2
    if args.base is not None and not (args.base / "connector" / "watukuy").is_dir():
        print(f"startup: {args.base} holds no connector/watukuy", file=sys.stderr)
        return 2
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    signals_interrupt()
    for tree in (ROOT, args.base):  # as an installed package has them: pip compiles a wheel
        if tree is not None:
            compileall.compile_dir(tree / "connector", quiet=1)
    codes: list[tuple[str, Path | None]] = [("new", None)]
    if args.base is not None:
        codes.insert(0, ("base", args.base))
    runs: list[Run] = []
    with kafka_broker("startup") as bootstrap:
        try:
            for n in range(args.runs):
                for code, base in codes:
                    runs.append(one_run(args, bootstrap, code, base))
                    print(f"startup: run {n + 1} of {code} done", file=sys.stderr, flush=True)
        except (TimeoutError, RuntimeError, KeyboardInterrupt) as exc:
            print(f"startup: stopped: {exc!r}", file=sys.stderr)
    print("\n".join(report(runs, args)))
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
