"""Side by side, in one run: the encode-and-produce ceiling, watukuy, and a Singer pipeline.

    .venv/bin/python -m integration.bench.side_by_side [--quick] [--tenants 20] [--items 5000]
        [--page 500] [--commit-interval 100ms] [--partitions 8] [--pipelines ...]
        [--singer-parallel 0] [--timeout 240] [--keep-topics]

One broker (``$WATUKUY_BOOTSTRAP``, else the local one in ``.watukuy/broker``, started and
stopped here if it is not running) and one vendor simulator backlog (``python -m
integration.simulator``: ``--tenants`` x ``--items`` invoices, no mutations, a quota nobody
reaches) serve every pipeline in turn; each writes to topics of a fresh prefix (so each starts
from the initial cursor and an empty state) that are deleted after it. The pipelines:

1. ``ceiling``: the bare loop (``integration/bench/ceiling.py``, one process): the same items,
   read from a file, encoded as the Python poller's envelope (``watukuy.serde.events``,
   fastavro) and produced in transactions committed every ``--commit-interval``: no HTTP.
   ``ceiling+headers``: the same loop writing the seven CloudEvents headers a runner's event
   records carry (``ceiling.py --headers``): the same records, so the table tells what the
   headers cost apart from what the runner does.
2. ``watukuy``: one runner (``python -m watukuy.cli``, what ``watukuy-source`` runs) with the
   Python poller ``integration.pollers:invoices`` (``--page`` items a page, schedule 100ms..1s).
3. ``declarative``: the same with ``config/invoices.yaml`` (no Python; data checked against
   ``schemas/examples/invoice.avsc`` and written as an Avro record), ``limit`` = ``--page``, its
   budget raised out of the way (``config/invoices.yaml`` holds it to 20 requests/s).
4. ``declarative+transform``: the same plus a typical ``transform`` (a filter every item
   passes, a ``drop``, an HMAC ``mask`` keyed by a ``${env:...}`` reference, a ``set``
   template; ``integration/bench/transform_row.py``) and the published item's schema. Issue
   23 bounds its CPU per event at +20% of the plain declarative row's; the run prints both
   percentages after the table.
5. ``declarative+next_url`` and ``declarative+wrapped`` (issue 43): the same items as the
   simulator serves them Zendesk's way (the next page a URL in the body) and Chargebee's
   (``records: "list[*].customer"``); ``integration/bench/shape_rows.py``.
6. ``singer``: ``tap-rest-api-msdk | target-kafka`` from PyPI, each pip-installed by this script
   into a virtualenv of its own under ``.watukuy/bench/venvs`` (kept between runs); one
   pipeline per tenant (the tap takes one bearer token), ``--singer-parallel`` at once (0: all).
   If they cannot be installed the row says "not run" and why.

A read_committed consumer in this process reads each pipeline's topic until it holds
``tenants x items`` events. Per pipeline:

- ``events/s``: events / (launch to last event visible), start-up included;
- ``first s``: launch to the first event visible (imports, topic creation, group join, ...);
- ``steady/s``: events/s from when 10% of the events were visible to when 90% were (start-up
  and the tail left out);
- ``CPU µs/ev``: user + system CPU of every process of the pipeline (the runner; each tap and
  target; the ceiling process), from ``/proc`` and ``wait4``, until the last event was visible,
  per event; ``steady µs/ev`` the same over the steady window; ``start CPU s`` the CPU spent
  before the first event was visible. The broker, the simulator and this consumer are not
  counted (they share the two cores, so they slow every row alike);
- ``x ceiling``: steady events/s and steady events per CPU-second, each over those of the
  ``ceiling`` row run last before it (the first one for rows before any), so that
  ``--pipelines ceiling,watukuy,ceiling,watukuy`` gives pairs measured minutes apart;
- ``check``: watukuy's and the ceiling's events decode, every tenant's sequence is 1..items,
  ids are distinct, and the transformed row's items are transformed; Singer's (id, etag)
  pairs are distinct; nothing more arrives in 2 s.

``--quick`` (4 tenants x 1,000 items, pages of 250) is a short sanity run. Configs, the
backlog file and logs are in ``.watukuy/bench/side_by_side/``. The table is printed as
Markdown, as ``integration/bench/RESULTS.md`` quotes it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from integration.bench import shape_rows, transform_row
from integration.bench import singer as peer
from integration.bench.cpu import CpuMeter, live_cpu_seconds
from integration.bench.throughput import check
from integration.demo import (
    ROOT,
    Simulator,
    committed_reader,
    delete_topics,
    example_config,
    kafka_broker,
    runner_config,
    runner_env,
    signals_interrupt,
    start_simulator,
    wait_for_topic,
    write_config,
)
from integration.kafka import broker
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder
from watukuy.serde.events import EventSchemas, decode_event

BENCH_DIR = ROOT / ".watukuy" / "bench" / "side_by_side"
VENVS = ROOT / ".watukuy" / "bench" / "venvs"
PIPELINES = (
    "ceiling",
    "ceiling+headers",
    "watukuy",
    "declarative",
    transform_row.NAME,
    *shape_rows.NAMES,
    "singer",
)
SCHEDULE = {"min": "100ms", "max": "1s"}
PROFILES = {
    "default": {"tenants": 20, "items": 5000, "page": 500},
    "quick": {"tenants": 4, "items": 1000, "page": 250},
}

Values = list[tuple[bytes | None, bytes | None]]


STEADY = (0.1, 0.9)
"""The steady part of a run: from when 10% of the events were visible to when 90% were."""


@dataclass
class Row:
    name: str
    expected: int
    skipped: str = ""  # why it was not run
    seen: int = 0
    first: float = math.nan  # launch -> first event visible
    last: float = math.nan  # launch -> the expected count visible
    cpu_at_first: float = math.nan
    cpu: float = math.nan  # CPU seconds of the pipeline until the last event was visible
    samples: list[tuple[float, int, float]] = field(default_factory=list)
    """(seconds since launch, events visible, CPU seconds of the pipeline), about 5 a second."""
    processes: int = 0
    load: float = math.nan  # 1-minute load average when the row started
    vendor_cpu: float = math.nan  # the simulator's CPU seconds over the row (not counted)
    broker_cpu: float = math.nan  # the local broker's, if it is the one in .watukuy/broker
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.seen >= self.expected

    @property
    def rate(self) -> float:
        return self.expected / self.last if self.complete else math.nan

    def _steady(self) -> tuple[float, int, float] | None:
        """(seconds, events, CPU seconds) between the samples bounding :data:`STEADY`; ``None``
        if the run is too short to tell (under half a second, or one consumer batch)."""
        low, high = (self.expected * share for share in STEADY)
        start = next((s for s in self.samples if s[1] >= low), None)
        end = next((s for s in self.samples if s[1] >= high), None)
        if not self.complete or start is None or end is None or end[0] - start[0] < 0.5:
            return None
        return end[0] - start[0], end[1] - start[1], end[2] - start[2]

    @property
    def steady_rate(self) -> float:
        steady = self._steady()
        return steady[1] / steady[0] if steady else math.nan

    @property
    def us_per_event(self) -> float:
        return self.cpu / self.expected * 1e6 if self.complete else math.nan

    @property
    def steady_us_per_event(self) -> float:
        steady = self._steady()
        return steady[2] / steady[1] * 1e6 if steady else math.nan


# -- launching ---------------------------------------------------------------------------------


Job = Callable[[CpuMeter], list[subprocess.Popen[bytes]]]
"""Starts one unit of a pipeline (a runner; a tap piped into a target), adding its processes to
the meter; returns them."""


@dataclass
class Launcher:
    """Starts ``jobs``, at most ``parallel`` at once (0: all), as earlier ones finish."""

    jobs: list[Job]
    parallel: int = 0
    meter: CpuMeter = field(default_factory=CpuMeter)
    units: list[list[subprocess.Popen[bytes]]] = field(default_factory=list)

    def tick(self) -> None:
        self.meter.reap()
        running = sum(1 for unit in self.units if any(p.returncode is None for p in unit))
        while self.jobs and (not self.parallel or running < self.parallel):
            self.units.append(self.jobs.pop(0)(self.meter))
            running += 1

    def finished(self) -> bool:
        return not self.jobs and self.meter.running() == 0

    def stop(self, timeout: float) -> list[int | None]:
        """Wait up to ``timeout`` for the processes to end by themselves, then SIGTERM."""
        self.jobs.clear()
        deadline = time.monotonic() + timeout
        while self.meter.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        return [self.meter.stop(p, signal.SIGTERM, 60) for p in self.meter.processes]


def popen(command: Sequence[str], log: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            list(command),
            cwd=ROOT,
            stderr=out,
            stdout=kwargs.pop("stdout", out),
            stdin=kwargs.pop("stdin", subprocess.DEVNULL),
            start_new_session=True,  # Ctrl-C reaches this script only; it stops them
            **kwargs,
        )


# -- measuring ---------------------------------------------------------------------------------


def measure(
    row: Row,
    bootstrap: str,
    topic: str,
    launcher: Launcher,
    timeout: float,
    *,
    stop_wait: float,
    on_first: Callable[[], None] = lambda: None,
) -> Values:
    """Launch, read ``topic`` read_committed until ``row.expected`` events, stop; the values."""
    values: Values = []
    started = time.monotonic()
    deadline = started + timeout
    launcher.tick()
    consumer = None
    try:
        partitions = wait_for_topic(bootstrap, topic, timeout, lambda: not launcher.finished())
        if partitions is None:
            row.problems.append(f"{topic} never appeared")
            return values
        consumer = committed_reader(bootstrap, topic, partitions)
        quiet_since = time.monotonic()
        while len(values) < row.expected and time.monotonic() < deadline:
            launcher.tick()
            batch = consumer.consume(num_messages=10_000, timeout=0.2)
            now = time.monotonic()
            got = [(m.key(), m.value()) for m in batch if m.error() is None]
            cpu = launcher.meter.seconds()
            row.samples.append((now - started, len(values) + len(got), cpu))
            if got:
                quiet_since = now
                values.extend(got)
                if math.isnan(row.first):
                    row.first = now - started
                    row.cpu_at_first = cpu
                    on_first()
            elif launcher.finished() and now - quiet_since > 3:
                break  # everything exited and nothing more comes
        row.seen = len(values)
        row.last = time.monotonic() - started
        row.cpu = launcher.meter.seconds()
        row.processes = len(launcher.meter.processes)
        if not row.complete:
            row.problems.append(f"only {row.seen} of {row.expected} events")
    finally:
        codes = launcher.stop(stop_wait)
        if any(code != 0 for code in codes):
            bad = sorted({c for c in codes if c != 0}, key=str)
            row.problems.append(
                f"exit codes {bad}; see {BENCH_DIR.relative_to(ROOT)}/{_file_name(row.name)}*.log"
            )
        if consumer is not None:
            drain_until = time.monotonic() + 2
            extra = 0
            while time.monotonic() < drain_until:
                extra += sum(1 for m in consumer.consume(10_000, 0.2) if m.error() is None)
            if extra:
                row.problems.append(f"{extra} events after the expected count")
            consumer.close()
    return values


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


# -- the pipelines -----------------------------------------------------------------------------


@dataclass
class Bench:
    args: argparse.Namespace
    bootstrap: str
    sim: Simulator
    backlog: Path

    @property
    def expected(self) -> int:
        return int(self.args.tenants * self.args.items)

    def log(self, name: str) -> Path:
        path = BENCH_DIR / f"{name}.log"
        path.write_text("")
        return path

    def ceiling(self, prefix: str, *, headers: bool = False) -> tuple[Row, Values]:
        row = Row("ceiling+headers" if headers else "ceiling", self.expected)
        topic = f"{prefix}.events.invoices"
        create_topic(self.bootstrap, topic, self.args.partitions)
        command = [
            sys.executable, "-m", "integration.bench.ceiling", "--bootstrap", self.bootstrap,
            "--topic", topic, "--items", str(self.backlog), "--page", str(self.args.page),
            "--commit-interval", str(self.args.commit_seconds), *(["--headers"] if headers else []),
        ]  # fmt: skip
        log = self.log(_file_name(row.name))
        env = runner_env(self.sim.base_url)
        launcher = Launcher([lambda meter: _started(meter, popen(command, log, env=env))])
        values = measure(row, self.bootstrap, topic, launcher, self.args.timeout, stop_wait=30)
        if row.complete:
            schemas = EventSchemas()
            schemas.writer("invoices")
            row.problems.extend(
                check(values, self.args.tenants, self.args.items,
                      lambda raw: decode_event(raw, schemas.resolve))
            )  # fmt: skip
        return row, values

    def watukuy(self, prefix: str, name: str) -> tuple[Row, Values]:
        """A runner: the Python poller (``watukuy``), the declarative one, or it transformed."""
        row = Row(name, self.expected)
        stem = _file_name(name)
        example = None
        mask_key: dict[str, str] = {}
        if name != "watukuy":
            example = example_config(SCHEDULE)
            example["budgets"] = {"vendor": {"rate": "100000/s", "burst": 100000}}
            for poller in example["pollers"]:
                poller["request"]["query"]["limit"] = self.args.page
        if name == transform_row.NAME:
            assert example is not None
            example = transform_row.transformed(example, BENCH_DIR)
            mask_key = transform_row.mask_key_env()  # in the runner's environment only
        if name in shape_rows.NAMES:
            assert example is not None
            example = shape_rows.reshaped(example, name, self.args.page)
        config = write_config(
            BENCH_DIR / f"{stem}.yaml",
            runner_config(
                self.bootstrap, prefix, f"bench-{stem}", partitions=self.args.partitions,
                example=example, **{"commit.interval": self.args.commit_interval},
            ),
            "Written by python -m integration.bench.side_by_side",
        )  # fmt: skip
        env = runner_env(
            self.sim.base_url,
            WATUKUY_SCHEDULE_MIN=SCHEDULE["min"],
            WATUKUY_SCHEDULE_MAX=SCHEDULE["max"],
            WATUKUY_PAGE_SIZE=str(self.args.page),
            **mask_key,
        )
        log = self.log(stem)
        command = [sys.executable, "-m", "watukuy.cli", "--config", str(config)]
        launcher = Launcher([lambda meter: _started(meter, popen(command, log, env=env))])
        topic = f"{prefix}.events.invoices"
        spy: list[subprocess.Popen[bytes]] = []

        def profile() -> None:
            if self.args.py_spy:
                runner = launcher.meter.processes[0].pid
                out = BENCH_DIR / f"{stem}.py-spy"
                spy.append(start_py_spy(runner, self.args.py_spy, out))

        # a runner runs until told to stop: SIGTERM once the events are in
        values = measure(
            row, self.bootstrap, topic, launcher, self.args.timeout, stop_wait=0, on_first=profile
        )
        for process in spy:
            process.wait(60)
            print(summarize_py_spy(BENCH_DIR / f"{stem}.py-spy"), file=sys.stderr)
        if row.complete:
            resolver = SchemaTopicResolver(self.bootstrap, f"{prefix}.schemas")
            try:
                decode = event_decoder(resolve=resolver)
                row.problems.extend(check(values, self.args.tenants, self.args.items, decode))
                if name == transform_row.NAME:
                    row.problems.extend(transform_row.check_published(values, decode))
            finally:
                resolver.close()
        return row, values

    def singer(self, prefix: str, installed: peer.Installed) -> tuple[Row, Values]:
        row = Row("singer", self.expected)
        topic = f"{prefix}.{peer.STREAM}"
        create_topic(self.bootstrap, topic, self.args.partitions)
        target = BENCH_DIR / "singer-target.json"
        target.write_text(json.dumps(peer.target_config(self.bootstrap, f"{prefix}.")))
        jobs: list[Job] = []
        for tenant in self.sim.tenants:
            config = BENCH_DIR / f"singer-tap-{tenant['id']}.json"  # holds a token: .watukuy/
            config.write_text(
                json.dumps(peer.tap_config(self.sim.base_url, tenant, self.args.page))
            )
            jobs.append(
                self._singer_job(installed, config, target, self.log(f"singer-{tenant['id']}"))
            )
        launcher = Launcher(jobs, self.args.singer_parallel)
        values = measure(row, self.bootstrap, topic, launcher, self.args.timeout, stop_wait=30)
        pairs = set()
        for _, raw in values:
            record = json.loads(raw or b"{}")
            pairs.add((record.get("id"), record.get("etag")))
        if row.complete and len(pairs) != len(values):
            row.problems.append(f"{len(values) - len(pairs)} repeated (id, etag)")
        return row, values

    @staticmethod
    def _singer_job(
        installed: peer.Installed, tap_config: Path, target_config: Path, log: Path
    ) -> Job:
        def start(meter: CpuMeter) -> list[subprocess.Popen[bytes]]:
            tap = popen(
                [str(installed.tap), "--config", str(tap_config)], log, stdout=subprocess.PIPE
            )
            target = popen(
                [str(installed.target), "--config", str(target_config)], log, stdin=tap.stdout
            )
            assert tap.stdout is not None
            tap.stdout.close()  # the target holds the pipe now; the tap sees EPIPE if it dies
            return _started(meter, tap, target)

        return start


def start_py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """``py-spy record --gil`` (the thread holding the GIL: where Python time goes) of ``pid`` for
    ``seconds``, collapsed stacks (``--format raw``) in
    ``out`` (it slows the profiled process: read the other figures from a run without it)."""
    exe = VENVS / "py-spy" / "bin" / "py-spy"
    return popen(
        [str(exe), "record", "--pid", str(pid), "--duration", f"{seconds:g}", "--rate", "200",
         "--format", "raw", "--output", str(out), "--nonblocking", "--gil"],
        out.with_suffix(".log"),
    )  # fmt: skip


def summarize_py_spy(path: Path, top: int = 20) -> str:
    """The functions present in the most samples (inclusive) and the most own time, as shares of
    all samples, from py-spy's collapsed stacks (``frame;frame;... count`` lines)."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        return f"py-spy: no profile ({exc})"
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].split(":")[0].rstrip(")")
                  for f in stack.split(";")]  # fmt: skip
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    if not total:
        return "py-spy: no samples"
    out = [f"py-spy {path.name}: {total} samples; inclusive %:"]
    out += [f"  {n / total:6.1%}  {f}" for f, n in inclusive.most_common(top)]
    out.append("own %:")
    out += [f"  {n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    return "\n".join(out)


def _file_name(pipeline: str) -> str:
    """A pipeline's name as its runner.id and the stem of its files (runner.id allows no +)."""
    return pipeline.replace("+", "-")


def _started(meter: CpuMeter, *processes: subprocess.Popen[bytes]) -> list[subprocess.Popen[bytes]]:
    for process in processes:
        meter.add(process)
    return list(processes)


# -- the run -----------------------------------------------------------------------------------


def fetch_backlog(sim: Simulator, path: Path) -> None:
    """Every tenant's items from the simulator's admin API (not counted), for the ceiling."""
    backlog = {}
    for tenant in sim.tenants:
        url = f"{sim.base_url}/_admin/tenants/{tenant['id']}/items"
        with urllib.request.urlopen(url, timeout=60) as response:
            backlog[tenant["id"]] = json.load(response)["data"]
    path.write_text(json.dumps(backlog))


def versions(installed: peer.Installed | None) -> str:
    import confluent_kafka
    import fastavro

    singer = (
        f"; {peer.TAP} {installed.tap_version}, {peer.TARGET} {installed.target_version}"
        if installed
        else ""
    )
    return (
        f"Python {platform.python_version()}; Kafka {broker.kafka_version()}; confluent-kafka "
        f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}); "
        f"fastavro {fastavro.__version__}{singer}"
    )


def commit_head() -> str:
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "?"


def fmt(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else format(value, spec)


def ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else math.nan


def table(rows: list[Row]) -> list[str]:
    ceiling = next((r for r in rows if r.name == "ceiling" and r.complete), None)
    lines = [
        "| pipeline | events | events/s | first s | steady/s | CPU µs/ev | steady µs/ev "
        "| start CPU s | processes | x ceiling: steady/s | x ceiling: ev/CPU-s "
        "| vendor CPU s | broker CPU s | load | check |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        if r.skipped:
            lines.append(f"| {r.name} | not run ({r.skipped}) |" + " |" * 13)
            continue
        if r.name == "ceiling" and r.complete:
            ceiling = r  # the rows after it are compared with it
        speed = per_cpu = math.nan
        if ceiling is not None and r.complete:  # nan when a run was too short to have a steady part
            speed = ratio(r.steady_rate, ceiling.steady_rate)
            per_cpu = ratio(ceiling.steady_us_per_event, r.steady_us_per_event)
        lines.append(
            f"| {r.name} | {r.seen:,} | {fmt(r.rate, ',.0f')} | {fmt(r.first, '.1f')} "
            f"| {fmt(r.steady_rate, ',.0f')} | {fmt(r.us_per_event, ',.0f')} "
            f"| {fmt(r.steady_us_per_event, ',.0f')} | {fmt(r.cpu_at_first, '.1f')} "
            f"| {r.processes} | {fmt(speed, '.2f')} | {fmt(per_cpu, '.2f')} "
            f"| {fmt(r.vendor_cpu, '.1f')} | {fmt(r.broker_cpu, '.1f')} | {fmt(r.load, '.1f')} "
            f"| {'; '.join(r.problems) or 'ok'} |"
        )
    return lines


def run(args: argparse.Namespace, rows: list[Row]) -> str:
    with kafka_broker("side_by_side") as bootstrap:
        installed: peer.Installed | None = None
        if "singer" in args.pipelines:
            print("side_by_side: installing/reusing the Singer virtualenvs ...", file=sys.stderr)
            try:
                installed = peer.install(VENVS, args.tap_spec, args.target_spec)
            except peer.SingerUnavailable as exc:
                print(f"side_by_side: the Singer row is not run: {exc}", file=sys.stderr)
                args.singer_skipped = str(exc)
        if args.py_spy:
            peer.venv_tool(VENVS, "py-spy", "py-spy")
        local = broker.read_running()
        broker_pid = local.pid if local is not None and local.bootstrap == bootstrap else 0
        sim = start_simulator(
            "--tenants", str(args.tenants), "--items", str(args.items),
            "--quota", str(10**9), log=BENCH_DIR / "simulator.log",
        )  # fmt: skip
        header = (
            f"{args.tenants} tenants x {args.items:,} items = {args.tenants * args.items:,} "
            f"events a pipeline; pages of {args.page}; commit.interval {args.commit_interval}; "
            f"{args.partitions} partitions; broker {bootstrap}; {os.cpu_count()} CPUs; "
            f"load {os.getloadavg()[0]:.1f}; commit {commit_head()}\n{versions(installed)}"
        )
        print(header, file=sys.stderr, flush=True)
        try:
            backlog = BENCH_DIR / "backlog.json"
            fetch_backlog(sim, backlog)
            bench = Bench(args, bootstrap, sim, backlog)
            for name in args.pipelines:
                print(f"... {name}", file=sys.stderr, flush=True)
                if name == "singer" and installed is None:
                    rows.append(Row(name, bench.expected, skipped=args.singer_skipped))
                    continue
                prefix = f"sbs-{uuid.uuid4().hex[:8]}"
                load = os.getloadavg()[0]
                vendor0, broker0 = live_cpu_seconds(sim.process.pid), live_cpu_seconds(broker_pid)
                try:
                    if name in ("ceiling", "ceiling+headers"):
                        row, _ = bench.ceiling(prefix, headers=name == "ceiling+headers")
                    elif name == "singer":
                        assert installed is not None
                        row, _ = bench.singer(prefix, installed)
                    else:
                        row, _ = bench.watukuy(prefix, name)
                finally:
                    if not args.keep_topics:
                        delete_topics(bootstrap, prefix)
                row.load = load
                row.vendor_cpu = _spent(sim.process.pid, vendor0)
                row.broker_cpu = _spent(broker_pid, broker0)
                rows.append(row)
                print("\n".join(table(rows)[-1:]), file=sys.stderr, flush=True)
        finally:
            sim.stop()
    return header


def _spent(pid: int, before: float | None) -> float:
    now = live_cpu_seconds(pid) if pid else None
    return now - before if now is not None and before is not None else math.nan


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.side_by_side",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="4 tenants x 1,000 items, pages of 250"
    )
    parser.add_argument("--tenants", type=int, help="simulated tenants (20)")
    parser.add_argument("--items", type=int, help="invoices per tenant (5,000)")
    parser.add_argument("--page", type=int, help="items per page, 1..500 (500)")
    parser.add_argument("--commit-interval", default="100ms", help="runner.commit.interval (100ms)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of every topic (8)")
    parser.add_argument(
        "--pipelines", default=",".join(PIPELINES), help=f"which, in order ({','.join(PIPELINES)})"
    )
    parser.add_argument(
        "--singer-parallel", type=int, default=0, help="Singer pipelines at once (0: all)"
    )
    parser.add_argument("--tap-spec", default=peer.TAP_SPEC, help=f"pip spec ({peer.TAP_SPEC})")
    parser.add_argument(
        "--target-spec", default=peer.TARGET_SPEC, help=f"pip spec ({peer.TARGET_SPEC})"
    )
    parser.add_argument("--timeout", type=float, default=240, help="give up on a pipeline (240 s)")
    parser.add_argument(
        "--py-spy",
        type=float,
        default=0,
        metavar="SECONDS",
        help="profile the runner with py-spy (installed into .watukuy/bench/venvs) for this "
        "long from its first event, and print where its time goes (off)",
    )
    parser.add_argument("--keep-topics", action="store_true", help="keep each pipeline's topics")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    for key, value in PROFILES["quick" if args.quick else "default"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not 1 <= args.page <= 500:
        parser.error("--page must be 1..500 (the simulator's limit)")
    args.pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    unknown = sorted(set(args.pipelines) - set(PIPELINES))
    if unknown:
        parser.error(f"unknown pipelines {unknown}; choose from {', '.join(PIPELINES)}")
    args.commit_seconds = duration_seconds(args.commit_interval)
    args.singer_skipped = ""
    return args


def duration_seconds(text: str) -> float:
    """``100ms``, ``2s`` or a number of seconds."""
    text = text.strip()
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.removesuffix("s"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    signals_interrupt()
    rows: list[Row] = []
    header = ""
    try:
        header = run(args, rows)
    except KeyboardInterrupt:
        print("side_by_side: interrupted; the pipelines done so far:", file=sys.stderr)
    command = "python -m integration.bench.side_by_side " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    print(f"\n{time.strftime('%Y-%m-%d %H:%M %Z')}; {command.strip()}\n{header}\n")
    print("\n".join(table(rows)))
    versus = transform_row.versus_plain(  # a pipeline listed twice: its last row
        {r.name: (r.us_per_event, r.steady_us_per_event) for r in rows if not r.skipped}
    )
    if versus:
        print("\n" + "\n".join(versus))
    return 0 if rows and all(not r.problems for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
