"""`make demo`: two runners share a simulated vendor's tenants; one dies, the other takes over.

    python -m integration.demo [--seconds 60] [--tenants 5] [--kill-after 20] [--keep-topics] ...

What it starts, all on this machine, each a process of its own:

1. a Kafka broker: ``$WATUKUY_BOOTSTRAP`` if set, else the one in ``.watukuy/broker``, which the
   demo starts (and stops at the end) when it is not running;
2. the vendor simulator, ``python -m integration.simulator`` (``--tenants`` accounts of
   ``--items`` invoices each, one random change every ``--mutate-every``). Through its admin API
   the second tenant is made *rate-limited* (60% of its requests get 429 with ``Retry-After``)
   and the last one *failing* (503, every time);
3. two runners, ``demo-a`` and ``demo-b``: ``python -m watukuy.cli --config
   .watukuy/demo/runner.yaml`` (the ``watukuy-source`` command), one config for both, written
   from ``config/invoices.yaml`` (the declarative invoices poller, no Python) on the demo's
   broker and a fresh topics prefix; each gets its ``runner.id`` and REST port from the
   environment. Logs in ``.watukuy/demo/``;
4. ``watukuy-source tail --from-beginning``, whose JSON lines (the decoded events, read
   committed) the demo prints as they come.
5. webhooks (issue 46): the tracker connector (``config/tracker.yaml``) polls every 15 minutes
   here, and the simulator sends every tenant's tracker changes, signed, to ``demo-a``'s
   ``/webhooks/tracker`` (to the survivor once ``demo-a`` is killed). Once the runners hold
   their tenants, the demo renames one project at the vendor and prints how long its event
   took to be readable on Kafka (well under a second: the webhook woke the poll).

Every few seconds it prints the ``watukuy-source status`` table: the owner of each tenant, its
state and its circuit. Once events flow and the failing tenant's circuit is open (and
``--kill-after`` seconds have passed), it SIGKILLs the runner that owns the most tenants and
follows the table until the other runner owns them. At the end of ``--seconds`` (or on Ctrl-C)
it stops the surviving runner (SIGTERM), the tail, the simulator and the broker if it started
it, prints a per-tenant summary (events, sequences gap-free from 1, the owner before and after
the kill, the vendor trouble) and checks that nothing it started is left running. The exit code
is non-zero if no event arrived, no tenant moved, a sequence has a gap or a repeat, or the
surviving runner did not stop cleanly; 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from integration.demo_hooks import SCHEDULE as HOOKED_SCHEDULE
from integration.demo_hooks import Timed, one_change, subscribe
from integration.demo_pieces import (
    EXAMPLE,
    POLLER,
    ROOT,
    Simulator,
    committed_reader,
    delete_topics,
    example_config,
    gap_free,
    kafka_broker,
    runner_config,
    runner_env,
    signals_interrupt,
    start_runner,
    start_simulator,
    stop_process,
    wait_for_topic,
    write_config,
)
from integration.demo_report import Outcome, summarize
from integration.demo_streams import (
    HOOK_SECRET,
    PII_KEY,
    StreamSeen,
    read_stream,
    stream_names,
    tracker_entry,
)
from integration.demo_vendor import Throttles, Trouble, apply, choose
from integration.demo_watch import Seen, Table, Tail, framed, read_status
from integration.processes import free_port
from watukuy.config import load_config

__all__ = [  # the pieces the benchmarks and tests import from here
    "EXAMPLE",
    "POLLER",
    "ROOT",
    "Simulator",
    "committed_reader",
    "delete_topics",
    "example_config",
    "gap_free",
    "kafka_broker",
    "main",
    "runner_config",
    "runner_env",
    "signals_interrupt",
    "start_runner",
    "start_simulator",
    "stop_process",
    "wait_for_topic",
    "write_config",
]

DEMO_DIR = ROOT / ".watukuy" / "demo"
POLLER_NAME = "invoices"
RUNNERS = ("demo-a", "demo-b")
SESSION_TIMEOUT = "6s"
"""``runner.session.timeout`` of the demo's runners: how long the group waits for a runner
that stopped answering before its tenants move. Shorter than the 10 s default so the move
shows within seconds of the SIGKILL; not below 6 s, the smallest session a Kafka broker
accepts by default (``group.min.session.timeout.ms``), so the demo also runs against a
``$WATUKUY_BOOTSTRAP`` cluster with default settings."""


class Demo:
    """One run: what it started, what it saw, and the moments that matter."""

    def __init__(self, args: argparse.Namespace, bootstrap: str) -> None:
        self.args, self.bootstrap = args, bootstrap
        self.prefix = args.prefix or f"demo-{uuid.uuid4().hex[:6]}"
        self.topic = f"{self.prefix}.events.{POLLER_NAME}"
        self.sim: Simulator | None = None
        self.runners: dict[str, subprocess.Popen[bytes]] = {}
        self.tail: Tail | None = None
        self.seen = Seen()
        self.trouble: Trouble | None = None
        self.throttles = Throttles({})
        self.started = time.monotonic()
        self.table = Table("", {})
        self.circuit_open_at: float | None = None
        self.victim: str | None = None
        self.killed_at: float | None = None
        self.before: dict[str, str] = {}  # tenant -> owner when the victim was killed
        self.at_kill: dict[str, int] = {}  # tenant -> events printed before the SIGKILL
        self.moved_at: float | None = None
        self.survivor_rc: int | None = None
        self.streams: list[StreamSeen] = []
        self.config_path = args.dir / "runner.yaml"
        self.ports: dict[str, int] = {}
        self.hooked_to: str | None = None  # the runner the vendor's webhooks go to
        self.hooked: Timed | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    # -- starting ------------------------------------------------------------------------------

    def start(self) -> None:
        args = self.args
        args.dir.mkdir(parents=True, exist_ok=True)
        logs = {name: args.dir / f"{name}.log" for name in (*RUNNERS, "simulator", "tail")}
        for log in logs.values():
            log.write_text("")
        self.sim = sim = start_simulator(
            "--tenants", str(args.tenants), "--items", str(args.items),
            "--mutate-every", args.mutate_every, log=logs["simulator"],
        )  # fmt: skip
        tenants = [t["id"] for t in sim.tenants]
        self.trouble = choose(tenants)
        apply(sim.base_url, self.trouble)
        say(
            f"vendor simulator {sim.base_url} (pid {sim.process.pid}): {len(tenants)} tenants "
            f"of {args.items} invoices, one random change every {args.mutate_every}"
        )
        for line in self.trouble.describe():
            say(f"  {line}")

        self.ports = ports = {name: free_port() for name in RUNNERS}
        self.throttles = Throttles(ports)
        config = self.write_config()
        # The config reads these; the demo's own status and tail need them set as well.
        os.environ.update(
            WATUKUY_VENDOR_URL=sim.base_url,
            WATUKUY_RUNNER_ID="demo-cli",
            WATUKUY_REST_PORT="0",
            WATUKUY_PII_KEY=PII_KEY,
            TRACKER_HOOK_SECRET=HOOK_SECRET,
        )
        say(
            f"config {shown(config)}: config/invoices.yaml on broker "
            f"{self.bootstrap}, topics {self.prefix}.*, runner.session.timeout {SESSION_TIMEOUT}"
        )
        for name, port in ports.items():
            env = runner_env(
                sim.base_url,
                WATUKUY_RUNNER_ID=name,
                WATUKUY_REST_PORT=str(port),
                WATUKUY_PII_KEY=PII_KEY,
                TRACKER_HOOK_SECRET=HOOK_SECRET,
            )
            runner = start_runner(config, env, logs[name])
            self.runners[name] = runner
            say(
                f"runner {name} (pid {runner.pid}, REST and /metrics on :{port}, log "
                f"{shown(logs[name])}): WATUKUY_RUNNER_ID={name} "
                f"WATUKUY_REST_PORT={port} watukuy-source --config {shown(config)}"
            )
        self.started = time.monotonic()
        self.config = load_config(config)
        partitions = wait_for_topic(
            self.bootstrap, self.topic, args.seconds, alive=lambda: self.live_runners() > 0
        )
        if partitions is None:
            say(f"{self.topic} did not appear within {args.seconds:g}s")
            return
        self.tail = Tail(config, POLLER_NAME, dict(os.environ), logs["tail"])
        say(
            f"tail (pid {self.tail.process.pid}): watukuy-source tail --config "
            f"{shown(config)} --poller {POLLER_NAME} --from-beginning"
        )
        self.hook_to(RUNNERS[0])
        say(f"events of {self.topic} as tail prints them, for {args.seconds:g}s; Ctrl-C stops\n")

    def hook_to(self, runner: str) -> None:
        """The vendor's webhooks of every tenant's tracker changes to ``runner``."""
        assert self.sim is not None
        tenants = [t["id"] for t in self.sim.tenants]
        url = subscribe(self.sim.base_url, tenants, self.ports[runner])
        self.hooked_to = runner
        say(
            f"the vendor sends signed webhooks of its tracker changes to {url} ({runner}); "
            f"the tracker polls every {HOOKED_SCHEDULE['max']} and a webhook wakes it"
        )

    def show_webhook(self) -> None:
        """Rename a project of the first tenant (untroubled) and time its event on Kafka."""
        assert self.sim is not None
        tenant = self.sim.tenants[0]["id"]
        self.hooked = one_change(self.bootstrap, self.prefix, self.sim.base_url, tenant, 10.0)
        say(self.hooked.line())

    def write_config(self) -> Path:
        args = self.args
        example = example_config({"min": args.poll_min, "max": args.poll_max})
        config = runner_config(
            self.bootstrap, self.prefix, "${env:WATUKUY_RUNNER_ID}", example=example
        )
        config["runner"]["session.timeout"] = SESSION_TIMEOUT
        config["rest"] = {"listen": "127.0.0.1:${env:WATUKUY_REST_PORT}"}
        config["pollers"].append(tracker_entry(HOOKED_SCHEDULE))  # webhooks wake it
        return write_config(
            self.config_path,
            config,
            "Written by python -m integration.demo from config/invoices.yaml (the declarative",
            "invoices poller) and config/tracker.yaml (a connector with four streams) on the",
            "demo's broker and topics prefix. Both runners run them; each",
            "sets its runner.id and REST port in the environment:",
            "  WATUKUY_VENDOR_URL=<simulator> WATUKUY_RUNNER_ID=demo-a WATUKUY_REST_PORT=8083 \\",
            "    watukuy-source --config .watukuy/demo/runner.yaml",
        )

    def live_runners(self) -> int:
        return sum(1 for runner in self.runners.values() if runner.poll() is None)

    # -- watching ------------------------------------------------------------------------------

    def watch(self) -> None:
        """Print events until the window ends, and the status table every few seconds."""
        args = self.args
        deadline = self.started + args.seconds
        next_table = self.started + min(args.status_every, 3.0)
        while time.monotonic() < deadline and self.live_runners() > 0:
            if self.moved_at is not None and args.stop_after_move is not None:
                deadline = min(deadline, self.started + self.moved_at + args.stop_after_move)
            until = min(next_table, deadline)
            if self.tail is None:
                time.sleep(max(0.0, until - time.monotonic()))
            else:
                for line in self.tail.lines(until):
                    print(line, flush=True)
                    self.seen.add(line)
            if time.monotonic() < next_table:
                continue
            self.look()
            if self.hooked is None and self.table.owners() and self.elapsed() >= 5:
                self.show_webhook()
            if self.victim is None and self.ready_to_kill():
                self.kill()
            fast = self.victim is not None and self.moved_at is None
            next_table = time.monotonic() + (2.0 if fast else args.status_every)

    def look(self) -> None:
        """Print the status table and note what changed in it."""
        self.table = read_status(self.config, POLLER_NAME)
        self.throttles.scrape()
        if not self.table.rows and self.elapsed() < 15:
            return  # the runners are still starting: no table to show yet
        assert self.trouble is not None
        limited = self.trouble.rate_limited
        waits = self.throttles.of(limited)
        framed(
            self.table,
            f"watukuy-source status at {self.elapsed():.1f}s",
            f"(runners' /metrics: {limited} waited {waits} times for the vendor: 429 with "
            f"Retry-After, watukuy_throttle_waits_total)",
        )
        failing = self.table.rows.get(self.trouble.failing)
        if self.circuit_open_at is None and failing is not None and failing.circuit == "open":
            self.circuit_open_at = self.elapsed()
            say(
                f"{self.trouble.failing}'s circuit is open: its requests failed too often in a "
                "row, so it waits before one probe; the other tenants keep flowing"
            )
        if self.victim is not None and self.moved_at is None:
            moved = self.moved()
            if moved and len(moved) == len(self.victim_tenants()):
                self.moved_at = self.elapsed()
                after = (self.moved_at - (self.killed_at or 0.0)) if self.killed_at else 0.0
                say(
                    f"{', '.join(sorted(moved))} moved from {self.victim} to {self.survivor()} "
                    f"{after:.1f}s after the SIGKILL; their sequences carry on"
                )

    def ready_to_kill(self) -> bool:
        """Events arrived, the failing circuit is open (or half the window is gone), and
        ``--kill-after`` seconds have passed."""
        if not self.table.owners() or self.elapsed() < self.args.kill_after:
            return False
        shown = self.seen.total > 0 and self.circuit_open_at is not None
        return shown or self.elapsed() >= self.args.seconds / 2

    def kill(self) -> None:
        """SIGKILL the runner that owns the most tenants: no goodbye, no commit."""
        owners = self.table.owners()
        counts = {name: sum(1 for o in owners.values() if o == name) for name in RUNNERS}
        self.victim = max(RUNNERS, key=lambda name: counts[name])
        self.before = dict(owners)
        runner = self.runners[self.victim]
        tenants = ", ".join(sorted(self.victim_tenants())) or "no tenant"
        say(f"SIGKILL runner {self.victim} (pid {runner.pid}), the owner of {tenants}")
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        self.killed_at = self.elapsed()
        if self.hooked_to == self.victim:
            self.hook_to(self.survivor())
        self.at_kill = {tenant: len(seq) for tenant, seq in self.seen.sequences.items()}
        say(
            f"its open transaction is aborted; after runner.session.timeout ({SESSION_TIMEOUT}) "
            f"the group gives its tenants to {self.survivor()}\n"
        )

    def survivor(self) -> str:
        return next(name for name in RUNNERS if name != self.victim)

    def victim_tenants(self) -> set[str]:
        return {tenant for tenant, owner in self.before.items() if owner == self.victim}

    def moved(self) -> set[str]:
        """The victim's tenants that the survivor now holds, as the table shows."""
        now = self.table.owners()
        return {t for t in self.victim_tenants() if now.get(t) == self.survivor()}

    # -- stopping ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything it started, in order: runners (one SIGTERM each: they commit what
        they hold), the tail once it has printed what they committed, the simulator."""
        if any(runner.poll() is None for runner in self.runners.values()):
            say("stopping the runners (SIGTERM) ...")
        for name, runner in self.runners.items():
            rc = stop_process(runner, signal.SIGTERM, 60)
            if name != self.victim:
                self.survivor_rc = rc if self.survivor_rc in (None, 0) else self.survivor_rc
        if self.tail is not None:
            quiet_until = time.monotonic() + 3  # the last commits on their way to the tail
            for line in self.tail.lines(quiet_until):
                print(line, flush=True)
                self.seen.add(line)
            self.tail.stop()
        if self.seen.total:  # the tracker's streams, read back while the topics exist
            entry = tracker_entry({})
            self.streams = [
                read_stream(self.config_path, poller, os.environ) for poller in stream_names(entry)
            ]
        if self.sim is not None:
            self.sim.stop()
        if not (self.args.keep_topics or self.args.prefix):
            delete_topics(self.bootstrap, self.prefix)

    def processes(self) -> dict[str, subprocess.Popen[bytes] | subprocess.Popen[str]]:
        started: dict[str, subprocess.Popen[bytes] | subprocess.Popen[str]] = {}
        if self.sim is not None:
            started["vendor simulator"] = self.sim.process
        for name, runner in self.runners.items():
            started[f"runner {name}"] = runner
        if self.tail is not None:
            started["tail"] = self.tail.process
        return started

    def outcome(self, interrupted: bool) -> Outcome:
        assert self.trouble is not None
        return Outcome(
            seen=self.seen,
            tenants=[t["id"] for t in self.sim.tenants] if self.sim is not None else [],
            trouble=self.trouble,
            throttles={t: self.throttles.of(t) for t in self.seen.sequences}
            | {self.trouble.rate_limited: self.throttles.of(self.trouble.rate_limited)},
            before=self.before,
            at_kill=self.at_kill,
            after=self.table.owners(),
            victim=self.victim,
            moved=self.moved() if self.victim is not None else set(),
            circuit_open_at=self.circuit_open_at,
            survivor_rc=self.survivor_rc,
            interrupted=interrupted,
        )


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


def ignore_signals() -> None:
    """From here on, Ctrl-C and friends cannot cut the cleanup short (every wait in it has a
    timeout followed by SIGKILL)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def run_demo(args: argparse.Namespace, bootstrap: str) -> int:
    demo = Demo(args, bootstrap)
    interrupted = False
    try:
        demo.start()
        demo.watch()
        if demo.live_runners() == 0:
            say("no runner is left running")
        else:
            say(f"the {args.seconds:g}s window is over")
    except KeyboardInterrupt:
        interrupted = True
        print("\ndemo: interrupted", flush=True)
    except SystemError as exc:
        # A Ctrl-C landing inside a C-level call (seen in a property read while the status
        # was read) surfaces as a SystemError whose cause is the KeyboardInterrupt.
        if not isinstance(exc.__cause__, KeyboardInterrupt):
            raise
        interrupted = True
        print("\ndemo: interrupted", flush=True)
    finally:
        ignore_signals()
        demo.stop()
    left = [
        f"{name} (pid {process.pid})"
        for name, process in demo.processes().items()
        if process.poll() is None
    ]
    stopped = ", ".join(f"{name} (pid {p.pid})" for name, p in demo.processes().items())
    if left:
        say(f"FAILED: still running: {', '.join(left)}")
        return 1
    say(f"stopped what it started: {stopped}; none of them is running")
    if demo.trouble is None:
        return 130 if interrupted else 1
    ok = summarize(demo.outcome(interrupted))
    for seen in demo.streams:
        say(seen.line())
    ok = ok and all(seen.events and not seen.clear_pii for seen in demo.streams)
    if (args.keep_topics or args.prefix) and demo.seen.total:
        say(f"kept the topics {demo.prefix}.* (the events are in {demo.topic})")
    return 130 if interrupted else 0 if ok else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--seconds", type=float, default=60.0, help="how long it runs (60)")
    add(
        "--kill-after",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="kill a runner no sooner than this (20)",
    )
    add(
        "--status-every",
        type=float,
        default=6.0,
        metavar="SECONDS",
        help="seconds between status tables (6)",
    )
    add(
        "--stop-after-move",
        type=float,
        metavar="SECONDS",
        help="end this long after the tenants moved, before the window's end (off)",
    )
    add("--tenants", type=int, default=5, metavar="N", help="simulated tenants, at least 3 (5)")
    add("--items", type=int, default=10, metavar="N", help="initial invoices per tenant (10)")
    add(
        "--mutate-every", default="1s", metavar="DURATION", help="one random change this often (1s)"
    )
    add(
        "--poll-min",
        default="1s",
        metavar="DURATION",
        help="an invoices tenant's shortest poll interval (1s)",
    )
    add(
        "--poll-max",
        default="3s",
        metavar="DURATION",
        help="its longest, when nothing changes (3s)",
    )
    add(
        "--dir",
        type=Path,
        default=DEMO_DIR,
        help="where its config and logs go (.watukuy/demo)",
    )
    add("--prefix", help="topics prefix (default: a fresh demo-XXXXXX per run, deleted after)")
    add("--keep-topics", action="store_true", help="keep the run's topics at the end")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.tenants < 3:
        _parser().error("--tenants: at least 3 (one flowing, one rate-limited, one failing)")
    signals_interrupt()
    try:
        with kafka_broker("demo") as bootstrap:
            return run_demo(args, bootstrap)
    except KeyboardInterrupt:  # during the broker's start
        return 130


if __name__ == "__main__":
    sys.exit(main())
