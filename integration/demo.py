"""`make demo`: the real runner polls a simulated vendor; its events arrive per tenant, in order.

    python -m integration.demo [--seconds 20] [--tenants 5] [--items 10] [--mutate-every 1s]
                               [--prefix demo-XXXXXX] [--keep-topics]

What it starts, all on this machine:

1. a Kafka broker: ``$WATUKUY_BOOTSTRAP`` if set, else the one in ``.watukuy/broker``, which the
   demo starts (and stops at the end) when it is not running;
2. the vendor simulator, ``python -m integration.simulator`` (``--tenants`` accounts of
   ``--items`` invoices each, one random create/update/delete every ``--mutate-every``);
3. one runner, ``python -m watukuy.cli --config .watukuy/demo/runner.yaml`` (the
   ``watukuy-source`` command), with the declarative invoices poller of
   ``config/invoices.yaml`` (no Python: tenants come from the simulator's ``/tenants``) and a
   fresh topics prefix per run, so every run starts from the initial cursor; its log goes to
   ``.watukuy/demo/runner.log``.

A read_committed consumer prints every event of ``<prefix>.events.invoices`` as one line
(tenant, sequence, type, subject, a few fields of the item) for ``--seconds``, counted from the
runner's start; then the runner gets SIGTERM (it commits its open transaction and leaves), the
consumer reads what that last transaction published, and a per-tenant summary tells whether each
tenant's sequence is gap-free from 1. Deletions are not reported: the token cursor only sees
creates and updates. The topics of the run are deleted at the end unless ``--keep-topics`` (or
an explicit ``--prefix``) is given. The exit code is non-zero if the runner fails, no event
arrives, or a sequence has a gap or a repeat.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from integration.kafka import broker
from watukuy.core.errors import WatukuyError
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder

ROOT = Path(__file__).resolve().parents[1]
DEMO_DIR = ROOT / ".watukuy" / "demo"
POLLER = "integration.pollers:invoices"
POLLER_NAME = "invoices"
EXAMPLE = ROOT / "config" / "invoices.yaml"
"""The declarative invoices poller the demo runs (the same one docker-compose runs)."""


# -- the pieces, also used by integration/bench ------------------------------------------------


@dataclass
class Simulator:
    process: subprocess.Popen[str]
    base_url: str
    tenants: list[dict[str, str]]

    def stop(self) -> int | None:
        return stop_process(self.process, signal.SIGTERM, 10)


def start_simulator(*options: str, log: Path | None = None) -> Simulator:
    """``python -m integration.simulator OPTIONS --port 0``; waits for its address line."""
    command = [sys.executable, "-m", "integration.simulator", *options, "--port", "0"]
    with open(log or os.devnull, "ab") as stderr:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # see start_runner
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline() if ready else ""
    if not line:
        stop_process(process, signal.SIGKILL, 5)
        where = f"; see {log}" if log is not None else ""
        raise RuntimeError(f"the vendor simulator did not print its address{where}")
    info = json.loads(line)
    return Simulator(process, info["base_url"], info["tenants"])


def example_config(schedule: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``config/invoices.yaml`` with its relative paths made absolute (the demo writes its own
    copy elsewhere) and, if given, the pollers' ``schedule`` replaced."""
    config = yaml.safe_load(EXAMPLE.read_text())
    for poller in config["pollers"]:
        if isinstance(poller.get("schema"), str):
            poller["schema"] = str((EXAMPLE.parent / poller["schema"]).resolve())
        if schedule is not None:
            poller["schedule"] = dict(schedule)
    return config


def runner_config(
    bootstrap: str,
    prefix: str,
    runner_id: str,
    *,
    partitions: int = 4,
    example: Mapping[str, Any] | None = None,
    **runner: Any,
) -> dict[str, Any]:
    """A runner config on this broker and topics prefix: the pollers and budgets of
    ``example`` (see :func:`example_config`), else the Python poller ``integration.pollers``."""
    config: dict[str, Any] = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": prefix, "partitions": partitions, "replication.factor": 1},
        "runner": {"id": runner_id, "commit.interval": "100ms", **runner},
        "rest": {"listen": "127.0.0.1:0"},  # any free port: the demo does not use REST
        "pollers": [{"python": POLLER}],
    }
    if example is not None:
        config["budgets"] = example.get("budgets", {})
        config["pollers"] = example["pollers"]
    return config


def write_config(path: Path, config: Mapping[str, Any], *comments: str) -> Path:
    """``config`` as YAML, after ``comments`` (one ``#`` line each)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "".join(f"# {line}\n" for line in comments)
    path.write_text(header + yaml.safe_dump(dict(config), sort_keys=False))
    return path


def runner_env(vendor_url: str, **extra: str) -> dict[str, str]:
    """The runner's environment: the simulator's address, and the repo on ``PYTHONPATH`` so
    ``integration.pollers`` (and an uninstalled ``watukuy``) can be imported."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "connector"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["WATUKUY_VENDOR_URL"] = vendor_url
    env.update(extra)
    return env


def start_runner(config: Path, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python -m watukuy.cli --config CONFIG`` (what ``watukuy-source`` runs).

    In a session of its own, so a Ctrl-C in the terminal reaches only this script, which then
    sends the runner exactly one SIGTERM (a second signal during its shutdown would kill it:
    see :func:`signals_interrupt`)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "watukuy.cli", "--config", str(config)],
            cwd=ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def signals_interrupt() -> None:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so this script always stops the
    processes it started (they run in sessions of their own and get no terminal signals)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.default_int_handler)


def stop_process(process: subprocess.Popen[Any], signum: int, timeout: float) -> int | None:
    """Send ``signum`` and wait for the exit code; SIGKILL after ``timeout`` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    if process.stdout is not None:
        process.stdout.close()
    return process.returncode


def wait_for_topic(
    bootstrap: str, topic: str, timeout: float, alive: Any = lambda: True
) -> list[int] | None:
    """The partitions of ``topic`` once the runner has created it; ``None`` on a timeout or
    when ``alive()`` turns false first."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        with contextlib.suppress(KafkaException):  # the broker is slow to answer: ask again
            metadata = admin.list_topics(timeout=5).topics.get(topic)
            if metadata is not None and metadata.error is None and metadata.partitions:
                return sorted(metadata.partitions)
        time.sleep(0.2)
    return None


def committed_reader(bootstrap: str, topic: str, partitions: list[int]) -> Consumer:
    """A read_committed consumer of all of ``topic`` from its beginning (no group commits)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"watukuy-reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    return consumer


def delete_topics(bootstrap: str, prefix: str) -> list[str]:
    """Delete the topics named ``<prefix>.*``; the names deleted."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + ".")]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(Exception):
                future.result(timeout=30)
    return sorted(names)


@contextlib.contextmanager
def kafka_broker(announce: str) -> Iterator[str]:
    """``$WATUKUY_BOOTSTRAP``, else the broker in ``.watukuy/broker``: started here (fetching
    Kafka on the first run) if it is not running, and then stopped on the way out."""
    given = os.environ.get("WATUKUY_BOOTSTRAP")
    if given:
        yield given
        return
    running = broker.read_running()
    if running is not None:
        yield running.bootstrap
        return
    print(f"{announce}: starting a local Kafka broker (the first run fetches Kafka) ...")
    sys.stdout.flush()
    started = broker.start()
    try:
        yield started.bootstrap
    finally:
        broker.stop()
        print(f"{announce}: stopped the broker it started")


# -- the demo ----------------------------------------------------------------------------------


@dataclass
class Seen:
    """What the consumer saw, per tenant in arrival (offset) order."""

    sequences: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    types: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    ids: Counter[str] = field(default_factory=Counter)
    undecodable: int = 0
    first_at: float | None = None

    @property
    def total(self) -> int:
        return sum(map(len, self.sequences.values()))


class EventDecoder:
    """Avro events decoded as any consumer without a registry would: the writer schema comes
    from ``<prefix>.schemas`` by the fingerprint each value carries."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self._resolver = SchemaTopicResolver(bootstrap, f"{prefix}.schemas")
        self._decode = event_decoder(resolve=self._resolver)

    def __call__(self, raw: bytes | None) -> dict[str, Any] | None:
        if raw is None:
            return None
        try:
            return self._decode(raw).to_dict()
        except WatukuyError:
            return None

    def close(self) -> None:
        self._resolver.close()


def describe(event: dict[str, Any]) -> str:
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    assert isinstance(data, dict)
    name = f'"{data["name"]}"' if "name" in data else ""
    amount = data.get("amount")
    money = f"{amount:>8.2f} {data.get('currency', '')}" if isinstance(amount, float | int) else ""
    return f"{name:<18} {money:<12} {data.get('status', '')}".rstrip()


def show(event: dict[str, Any], elapsed: float) -> str:
    return (
        f"{elapsed:6.1f}s  {event.get('partition', '?'):<8} #{event.get('sequence', '?'):<4} "
        f"{event.get('type', '?'):<8} {event.get('subject', '?'):<10} {describe(event)}"
    )


def consume(
    consumer: Consumer,
    decode_event: EventDecoder,
    seen: Seen,
    started: float,
    until: Any,
    quiet: bool = False,
) -> None:
    """Print and record events while ``until()`` is false."""
    while not until():
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            print(f"demo: consumer: {message.error()}", file=sys.stderr)
            continue
        event = decode_event(message.value())
        if event is None:
            seen.undecodable += 1
            continue
        now = time.monotonic()
        if seen.first_at is None:
            seen.first_at = now
        tenant = str(event.get("partition"))
        seen.sequences[tenant].append(int(event.get("sequence", 0)))
        seen.types[tenant][str(event.get("type"))] += 1
        seen.ids[str(event.get("id"))] += 1
        if not quiet:
            print(show(event, now - started), flush=True)


def gap_free(sequences: list[int]) -> bool:
    return sequences == list(range(1, len(sequences) + 1))


def summarize(seen: Seen, tenants: list[str], started: float, runner_rc: int | None) -> bool:
    """Print events per tenant and whether each sequence is 1, 2, 3, ...; True if all is well."""
    print("\nsummary: tenant    events  created  updated  sequences     gap-free from 1")
    ok = True
    for tenant in sorted(set(tenants) | seen.sequences.keys()):
        sequences, types = seen.sequences[tenant], seen.types[tenant]
        span = f"{sequences[0]}..{sequences[-1]}" if sequences else "-"
        good = gap_free(sequences)
        ok = ok and good
        verdict = "yes" if good and sequences else "-" if good else "NO"
        print(
            f"         {tenant:<9} {len(sequences):>6}  {types['created']:>7}  "
            f"{types['updated']:>7}  {span:<13} {verdict}"
        )
    repeated = sum(1 for count in seen.ids.values() if count > 1)
    first = "-" if seen.first_at is None else f"{seen.first_at - started:.1f}s after the start"
    print(
        f"         total     {seen.total:>6}  (first event {first}; "
        f"{repeated} repeated event ids; {seen.undecodable} undecodable)"
    )
    print(f"demo: the runner exited with code {runner_rc}")
    if runner_rc != 0:
        print("demo: FAILED: the runner did not exit cleanly")
        return False
    if seen.total == 0:
        print("demo: FAILED: no event arrived")
        return False
    if not ok or repeated or seen.undecodable:
        print("demo: FAILED: a tenant's sequence has a gap or a repeat")
        return False
    print("demo: every tenant's events arrived once, in order, numbered 1, 2, 3, ... without gaps")
    return True


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
    except OSError:
        return ""


def run_demo(args: argparse.Namespace, bootstrap: str) -> bool:
    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    prefix = args.prefix or f"demo-{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}.events.{POLLER_NAME}"
    sim_log, runner_log = DEMO_DIR / "simulator.log", DEMO_DIR / "runner.log"
    runner_log.write_text("")
    sim_log.write_text("")
    sim = start_simulator(
        "--tenants", str(args.tenants), "--items", str(args.items),
        "--mutate-every", args.mutate_every, log=sim_log,
    )  # fmt: skip
    runner: subprocess.Popen[bytes] | None = None
    consumer: Consumer | None = None
    decoder: EventDecoder | None = None
    seen, runner_rc, signalled = Seen(), None, False
    started = time.monotonic()
    try:
        example = example_config({"min": args.poll_min, "max": args.poll_max})
        config = write_config(
            DEMO_DIR / "runner.yaml",
            runner_config(bootstrap, prefix, "demo-runner", example=example),
            "Written by python -m integration.demo from config/invoices.yaml (the declarative",
            "invoices poller), on the demo's broker and topics prefix.",
            f"Run as: WATUKUY_VENDOR_URL={sim.base_url} \\",
            "  python -m watukuy.cli --config .watukuy/demo/runner.yaml",
        )
        env = runner_env(sim.base_url)
        print(f"demo: broker {bootstrap}; simulator {sim.base_url} ({args.tenants} tenants)")
        print(
            f"demo: runner: python -m watukuy.cli --config {config.relative_to(ROOT)} "
            f"(log {runner_log.relative_to(ROOT)})"
        )
        print(f"demo: events of {topic} for {args.seconds:g}s (read_committed); Ctrl-C stops\n")
        sys.stdout.flush()
        started = time.monotonic()
        runner = start_runner(config, env, runner_log)
        deadline = started + args.seconds
        proc = runner
        partitions = wait_for_topic(
            bootstrap, topic, args.seconds, alive=lambda: proc.poll() is None
        )
        if partitions is not None:
            consumer = committed_reader(bootstrap, topic, partitions)
            decoder = EventDecoder(bootstrap, prefix)
            with contextlib.suppress(KeyboardInterrupt):
                consume(
                    consumer,
                    decoder,
                    seen,
                    started,
                    lambda: time.monotonic() >= deadline or proc.poll() is not None,
                )
        elif runner.poll() is None:
            print(f"demo: {topic} did not appear within {args.seconds:g}s")
        if runner.poll() is None:
            print("\ndemo: stopping the runner (SIGTERM) ...", flush=True)
        else:
            print(f"\ndemo: the runner exited early (code {runner.returncode})", flush=True)
        signalled = True
        runner_rc = stop_process(runner, signal.SIGTERM, 60)
        if consumer is not None and decoder is not None:  # what it committed on its way out
            quiet_until = time.monotonic() + 3
            consume(consumer, decoder, seen, started, lambda: time.monotonic() >= quiet_until)
    except KeyboardInterrupt:
        print("\ndemo: interrupted", file=sys.stderr)
    finally:
        if runner is not None:  # one SIGTERM only: a second one could land in its teardown
            runner_rc = stop_process(runner, signal.SIGKILL if signalled else signal.SIGTERM, 60)
        if consumer is not None:
            consumer.close()
        if decoder is not None:
            decoder.close()
        sim.stop()
        if not (args.keep_topics or args.prefix):
            delete_topics(bootstrap, prefix)
    if runner_rc not in (0, None):
        print(f"demo: the runner's log ends with:\n{log_tail(runner_log)}", file=sys.stderr)
    ok = summarize(seen, [t["id"] for t in sim.tenants], started, runner_rc)
    if (args.keep_topics or args.prefix) and seen.total:
        print(f"demo: kept the topics {prefix}.* (the events are in {topic})")
    return ok


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to watch (20)")
    parser.add_argument("--tenants", type=int, default=5, help="simulated tenants (5)")
    parser.add_argument("--items", type=int, default=10, help="initial invoices per tenant (10)")
    parser.add_argument("--mutate-every", default="1s", help="one random change this often (1s)")
    parser.add_argument("--poll-min", default="1s", help="a tenant's shortest poll interval (1s)")
    parser.add_argument("--poll-max", default="3s", help="its longest, when nothing changes (3s)")
    parser.add_argument(
        "--prefix", help="topics prefix (default: a fresh demo-XXXXXX per run, deleted after)"
    )
    parser.add_argument(
        "--keep-topics", action="store_true", help="keep the run's topics at the end"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signals_interrupt()
    try:
        with kafka_broker("demo") as bootstrap:
            return 0 if run_demo(args, bootstrap) else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
