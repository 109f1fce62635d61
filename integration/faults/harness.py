"""What a fault scenario runs on: :class:`FaultContext` and :class:`RunnerPool`.

A scenario gets one :class:`FaultContext`: the Kafka bootstrap (the shared local broker of
``.watukuy/broker``, or its own via :meth:`FaultContext.private_broker` when it breaks the
broker), a work directory for configs and logs, fresh topics prefixes (deleted at the end), the
vendor simulator as a process of its own (:class:`~integration.faults.vendor.Simulator`), and
runner pools. Runners are real processes (:class:`~integration.runners.RunnerProcess`), with
or without the fault-injecting Kafka clients: they are SIGKILLed and SIGSTOPped like any
deployment and watched only through Kafka and their logs.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.demo_pieces import runner_config, write_config
from integration.faults.cluster import PrivateCluster
from integration.faults.report import Result
from integration.faults.topics import delete_prefix
from integration.faults.vendor import Simulator, start_simulator
from integration.faults.verify import TenantTruth, Verdict, verify
from integration.faults.watch import EventWatch
from integration.kafka import broker as brokers
from integration.processes import alive, signal_group
from integration.runners import RunnerProcess, assignments, runner_env, wait_for
from watukuy.store.kafka.local import state_path

POLLER_NAME = "invoices"
"""The poller of every pool's runners (``integration.pollers:invoices``), so its record keys
are ``invoices/<tenant>``."""


# -- the context ----------------------------------------------------------------------------


@dataclass
class FaultContext:
    """What one scenario runs on; :meth:`close` stops everything it started."""

    bootstrap: str
    workdir: Path
    keep_topics: bool = False
    prefixes: list[tuple[str, str]] = field(default_factory=list)  # (bootstrap, prefix)
    _simulators: list[Simulator] = field(default_factory=list)
    _pools: list[RunnerPool] = field(default_factory=list)
    _watches: list[EventWatch] = field(default_factory=list)
    _brokers: list[PrivateBroker] = field(default_factory=list)
    _clusters: list[PrivateCluster] = field(default_factory=list)

    def prefix(self, label: str, bootstrap: str | None = None) -> str:
        """A fresh topics prefix; its topics are deleted at :meth:`close`."""
        name = f"fault-{label}-{uuid.uuid4().hex[:6]}"
        self.prefixes.append((bootstrap or self.bootstrap, name))
        return name

    def simulator(self, tenants: int, items: int, *options: str, seed: int = 7) -> Simulator:
        """``python -m integration.simulator`` with ``tenants`` of ``items`` each; it changes
        nothing by itself (drive changes with :class:`~integration.faults.vendor.Mutator`)."""
        log = self.workdir / f"simulator-{len(self._simulators)}.log"
        sim = start_simulator(
            "--tenants", str(tenants), "--items", str(items), "--seed", str(seed),
            "--quota", "1000000", *options, log=log,
        )  # fmt: skip
        self._simulators.append(sim)
        return sim

    def pool(
        self, label: str, simulator: Simulator, *, bootstrap: str | None = None, **options: Any
    ) -> RunnerPool:
        """A runner pool on a fresh prefix (named after ``label``)."""
        where = bootstrap or self.bootstrap
        made = RunnerPool(where, self.prefix(label, where), simulator, self.workdir, **options)
        self._pools.append(made)
        return made

    def watch(
        self, pool: RunnerPool, timeout: float = 90, *, poller: str = POLLER_NAME
    ) -> EventWatch:
        """A read_committed consumer of the pool's events topic (of ``poller``), once the
        topic exists."""
        made = EventWatch(pool.bootstrap, pool.prefix, poller, timeout=timeout)
        self._watches.append(made)
        return made

    def private_broker(self) -> PrivateBroker:
        made = PrivateBroker(self.workdir / f"broker-{len(self._brokers)}")
        self._brokers.append(made)
        return made.start()

    def private_cluster(self, size: int = 3) -> PrivateCluster:
        made = PrivateCluster(self.workdir / f"cluster-{len(self._clusters)}", size)
        self._clusters.append(made)
        return made.start()

    def caught_up(self, pool: RunnerPool, watch: EventWatch, timeout: float = 90) -> float:
        """Wait until every live item's current version has an event; the seconds it took."""
        began = time.monotonic()
        sim = pool.simulator
        try:
            wait_for(lambda: watch.has_all(expected(sim)), timeout, "the runners to catch up")
        except TimeoutError as exc:
            missing = watch.missing(expected(sim))
            running = [r.name for r in pool.runners.values() if r.running]
            self.dump_stacks()
            raise TimeoutError(
                f"{exc}: {len(missing)} version(s) without an event, e.g. {missing[:3]}; "
                f"the watch read {watch.count} event(s); running: {running}"
            ) from None
        return time.monotonic() - began

    def wait_event(
        self, watch: EventWatch, since: float, keys: set[str] | None = None, timeout: float = 90
    ) -> float:
        """The monotonic time of the first event (of ``keys``) committed after ``since``."""
        try:
            return wait_for(
                lambda: watch.first_after(since, keys), timeout, "an event after the fault"
            )
        except TimeoutError:
            self.dump_stacks()
            raise

    def dump_stacks(self) -> None:
        """Where every running runner waits, into ``stacks-<prefix>-<name>-<start>.txt``."""
        for pool in self._pools:
            for runner in pool.runners.values():
                path = self.workdir / f"stacks-{pool.prefix}-{runner.name}-{runner.starts}.txt"
                runner.dump_stacks(path)

    def truth(self, simulator: Simulator) -> dict[str, TenantTruth]:
        """The ground truth of every tenant the simulator ever had, by record key."""
        out: dict[str, TenantTruth] = {}
        finals = expected(simulator)
        for tenant in simulator.known_tenants():
            out[f"{POLLER_NAME}/{tenant}"] = TenantTruth(
                simulator.served(tenant), finals.get(tenant)
            )
        return out

    def verify(self, pool: RunnerPool, *, dead_letters: bool = False) -> Verdict:
        """Check what ``pool``'s runners left on Kafka; stop (or kill) them first. With
        ``dead_letters``, each version served poisoned must have exactly one DLQ record."""
        sim = pool.simulator
        poisoned = None
        if dead_letters:
            poisoned = {f"{POLLER_NAME}/{t}": sim.poisoned(t) for t in sim.known_tenants()}
        return verify(
            pool.bootstrap,
            pool.prefix,
            self.truth(sim),
            poller=POLLER_NAME,
            transaction_timeout=pool.session_timeout,
            poisoned=poisoned,
        )

    def close(self) -> None:
        for watch in self._watches:
            watch.close()
        for pool in self._pools:
            with contextlib.suppress(Exception):
                pool.kill_all()
        for sim in self._simulators:
            sim.stop()
        for where, name in self.prefixes:
            private = [b.bootstrap for b in self._brokers] + [
                c.bootstrap for c in self._clusters if c.started
            ]
            if self.keep_topics or where in private:
                continue  # a private broker's topics go with its directory
            with contextlib.suppress(Exception):
                delete_prefix(where, name)
        for made in self._brokers:
            made.close()
        for cluster in self._clusters:
            cluster.close()

    def __enter__(self) -> FaultContext:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


# -- what must arrive, and the scenario's result --------------------------------------------


def expected(simulator: Simulator) -> dict[str, dict[str, str]]:
    """``{tenant: {item: version}}``: the live items' versions that must have an event, all
    but those served poisoned (they have a dead letter instead)."""
    out = {}
    for tenant, items in simulator.final_versions().items():
        poisoned = set(simulator.poisoned(tenant))
        out[tenant] = {i: v for i, v in items.items() if (i, v) not in poisoned}
    return out


def result(
    scenario: str,
    verdict: Verdict,
    *,
    rounds: int,
    recovery_s: float | None,
    problems: Sequence[str] = (),
) -> Result:
    """A scenario's Result from the verifier's verdict and the scenario's own findings."""
    found = [*problems, *verdict.summary()]
    return Result(
        scenario=scenario,
        rounds=rounds,
        events_verified=verdict.events_verified,
        duplicates=verdict.duplicates,
        losses=verdict.losses,
        aborted_seen=verdict.aborted_seen,
        recovery_s=recovery_s,
        ok=verdict.ok and not problems,
        problems=found,
    )


# -- runner pools ---------------------------------------------------------------------------


class RunnerPool:
    """Runners of one topics prefix and simulator, sharing keys through their group."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        simulator: Simulator,
        workdir: Path,
        *,
        partitions: int = 8,
        session_timeout: float = 5.0,
        replication_factor: int | None = 1,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.simulator = simulator
        self.workdir = workdir
        self.partitions = partitions
        self.session_timeout = session_timeout
        self.replication_factor = replication_factor  # None: watukuy's default for the cluster
        self.env = {
            # Polled often and never idle for long, so a scenario catches up in seconds.
            "WATUKUY_SCHEDULE_MIN": "250ms",
            "WATUKUY_SCHEDULE_MAX": "1s",
            **(env or {}),
        }
        self.runners: dict[str, RunnerProcess] = {}

    @property
    def group(self) -> str:
        return f"{self.prefix}.runners"

    @property
    def events_topic(self) -> str:
        return f"{self.prefix}.events.{POLLER_NAME}"

    @property
    def state_dir(self) -> Path:
        """Where the pool's runners keep their local state stores (``runner.state.dir``): every
        scenario runs with them, so each kill, restart and takeover goes through one."""
        return self.workdir / "state"

    def store_of(self, runner_id: str) -> Path:
        """The local state store of the runner ``runner_id``."""
        return state_path(self.state_dir, self.prefix, runner_id)

    def config(self, runner_id: str, **runner_options: Any) -> dict[str, Any]:
        config = runner_config(self.bootstrap, self.prefix, runner_id, partitions=self.partitions)
        config["runner"] |= {
            "session.timeout": f"{self.session_timeout:g}s",
            "state.dir": str(self.state_dir),
            **runner_options,
        }
        if self.replication_factor is None:
            del config["topics"]["replication.factor"]
        else:
            config["topics"]["replication.factor"] = self.replication_factor
        return config

    def add(
        self,
        name: str,
        *,
        runner_id: str | None = None,
        faults: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        **runner_options: Any,
    ) -> RunnerProcess:
        """A runner named ``name`` (its ``runner.id`` unless given), not started yet. With
        ``faults`` (options of ``integration.faults.runner``, possibly empty) it runs the
        fault-injecting runner instead of ``watukuy.cli``."""
        if name in self.runners:
            raise ValueError(f"a runner named {name} exists")
        config = self.workdir / f"{self.prefix}-{name}.yaml"
        write_config(config, self.config(runner_id or name, **runner_options))
        runner = RunnerProcess(
            name,
            config,
            runner_env(self.simulator.base_url, **self.env, **(env or {})),
            self.workdir / f"{self.prefix}-{name}.log",
            faults=faults,
            runner_id=runner_id or name,
        )
        self.runners[name] = runner
        return runner

    def start(self, count: int, **options: Any) -> list[RunnerProcess]:
        """Add and start runners ``r1..r<count>``; wait until they share every partition."""
        started = [self.add(f"r{i}", **options).start() for i in range(1, count + 1)]
        for runner in started:
            runner.wait_started()
        self.wait_sharing(count)
        return started

    def held(self) -> dict[str, set[int]]:
        """Partitions of the state topic each member (by ``runner.id``) holds now."""
        return {k: v for k, v in assignments(self.bootstrap, self.group).items() if v}

    def sharing(self, count: int) -> dict[str, set[int]] | None:
        held = self.held()
        covered = set().union(*held.values()) if held else set()
        if len(held) == count and covered == set(range(self.partitions)):
            return held
        return None

    def wait_sharing(self, count: int, timeout: float = 90) -> dict[str, set[int]]:
        try:
            return wait_for(lambda: self.sharing(count), timeout, f"{count} runner(s) sharing")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; the group has {self.held()}") from None

    def stop_all(self, timeout: float = 60) -> dict[str, int | None]:
        """SIGTERM every running runner at once, then wait for each; their exit codes."""
        for runner in self.runners.values():
            runner.signal(signal.SIGCONT)
            runner.signal(signal.SIGTERM)
        return {name: runner.wait(timeout) for name, runner in self.runners.items()}

    def kill_all(self) -> None:
        for runner in self.runners.values():
            runner.signal(signal.SIGKILL)
        for runner in self.runners.values():
            runner.wait(15)

    def logs(self) -> str:
        return "\n".join(f"==== {n}\n{r.output()}" for n, r in self.runners.items())


# -- a broker of the scenario's own ---------------------------------------------------------


@dataclass
class PrivateBroker:
    """A broker in a directory of its own, on ports of its own: killing it hurts no one else."""

    runtime: Path
    bootstrap: str = ""

    def start(self) -> PrivateBroker:
        self.bootstrap = brokers.start(self.runtime, fresh=True).bootstrap
        return self

    @property
    def pid(self) -> int | None:
        running = brokers.read_running(self.runtime)
        return None if running is None else running.pid

    def kill(self) -> None:
        """SIGKILL the broker's process group and wait until it is gone; its data stays."""
        pid = self.pid
        if pid is None:
            return
        signal_group(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), 30, "the killed broker to exit", step=0.1)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM, controlled), keeping its data."""
        brokers.stop(self.runtime, keep_data=True)

    def restart(self) -> None:
        """Start it again on the same ports and data (after :meth:`kill` or :meth:`stop`)."""
        brokers.start(self.runtime, fresh=False)

    def close(self) -> None:
        """Stop it and delete its data; its server log stays beside it, for what it says about
        the scenario (``<runtime>-server.log``)."""
        log = self.runtime / "server.log"
        if log.exists():
            shutil.copyfile(log, self.runtime.with_name(f"{self.runtime.name}-server.log"))
        brokers.stop(self.runtime)

    def log_lines(self, needle: str) -> list[str]:
        """The lines of its server log that contain ``needle``."""
        log = self.runtime / "server.log"
        if not log.exists():
            return []
        with open(log, encoding="utf-8", errors="replace") as lines:
            return [line.rstrip("\n") for line in lines if needle in line]


def shared_bootstrap() -> contextlib.AbstractContextManager[str]:
    """``WATUKUY_BOOTSTRAP``, else the broker in ``.watukuy/broker`` (started if need be),
    as the test suite finds it."""
    return brokers.shared()
