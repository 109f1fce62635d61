"""Churn: runners 1 -> 2 -> 3 -> 2 -> 3 -> 2 -> 1 while tenants come and go.

Two connectors, each on a vendor simulator of its own so their tenants never mix:

- ``invoices``, the runners' config-file poller (declarative), lists its tenants from
  simulator A's ``/tenants`` (an ``http`` partitions source refreshed every second): tenants
  are added and removed at the vendor;
- ``orders``, a REST connector on simulator B with a ``static`` partition list: tenants are
  added and removed by PUTting its config with a changed list.

A removed tenant's state is then deleted over REST (``DELETE .../partitions/{key}``) once no
runner lists it any more (deleting a listed key would only bring it back fresh at the next
refresh). Its removal has taken effect when ``GET .../offsets`` no longer shows it; the events
topic's last stable offsets at that moment mark what came before. Items change all along, on
every tenant of both simulators, removed ones included.

Afterwards every present tenant passes the verifier (exactly once, gap-free, the committed
cursor and snapshot match), and every removed tenant has no event past its mark, a gap-free
sequence without duplicates before it, and its state tombstoned. Its versions served last are
not judged as losses: a poll in flight when it was removed may have been aborted, and nothing
polls it again.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from integration.faults.harness import POLLER_NAME, FaultContext
from integration.faults.report import Result
from integration.faults.scenarios.declarative import DeclarativePool, declarative_pool, invoices
from integration.faults.scenarios.rest_api import (
    call,
    connector_config,
    rest_port,
    stable_offsets,
)
from integration.faults.vendor import Mutator, Simulator
from integration.faults.verify import (
    Cursor,
    SeenEvent,
    TenantTruth,
    Verdict,
    check,
    read_cursors,
    read_events,
    settle_transactions,
)
from integration.faults.watch import EventWatch
from integration.runners import RunnerProcess, wait_for

NAME = "churn"
ORDERS = "orders"
WAIT = 60.0
"""Generous: six helpers share two cores."""


@dataclass
class Removal:
    connector: str
    tenant: str
    marks: dict[int, int]
    """The events topic's last stable offsets once the removal took effect."""

    @property
    def key(self) -> str:
        return f"{self.connector}/{self.tenant}"


@dataclass
class Churn:
    """The running pieces, and what the churn did to them."""

    pool: DeclarativePool
    sim_a: Simulator
    sim_b: Simulator
    orders: list[str]
    """Simulator B's tenants the ``orders`` connector lists now."""
    spare_b: list[str]
    """Simulator B's tenants not listed yet."""
    items: int
    """Items of a tenant added at simulator A."""
    settle: bool
    """Whether each step waits for the group to settle (else tenants change mid-rebalance)."""
    live: list[RunnerProcess] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def ports(self) -> list[int]:
        return [rest_port(runner) for runner in self.live]

    # -- runners ------------------------------------------------------------------------------

    def start(self, name: str) -> None:
        runner = self.pool.runners.get(name) or self.pool.add(name)
        runner.start().wait_started()
        self.live.append(runner)
        if self.settle:
            self.pool.wait_sharing(len(self.live))

    def stop(self, name: str, *, kill: bool = False) -> None:
        runner = self.pool.runners[name]
        self.live.remove(runner)
        if kill:
            runner.kill()
        else:
            code = runner.stop()
            if code not in (0, -signal.SIGTERM):
                self.problems.append(f"{name} stopped with exit code {code}")
        if self.settle:
            self.pool.wait_sharing(len(self.live))

    # -- tenants ------------------------------------------------------------------------------

    def add_vendor_tenant(self) -> None:
        """A new tenant at simulator A: ``invoices`` lists it at its next refresh."""
        self.sim_a.add_tenant(items=self.items)

    def remove_vendor_tenant(self) -> None:
        """The oldest tenant of simulator A goes away; then its state is deleted."""
        tenant = self.sim_a.tenants()[0]
        self.sim_a.remove_tenant(tenant)
        self.delete_state(POLLER_NAME, tenant)

    def add_order_tenant(self) -> None:
        self.orders.append(self.spare_b.pop(0))
        self.put_orders()

    def remove_order_tenant(self) -> None:
        tenant = self.orders.pop(0)
        self.put_orders()
        self.delete_state(ORDERS, tenant)

    def put_orders(self) -> None:
        config = connector_config(self.sim_b, self.orders)
        port = self.ports()[-1]
        answer = call(port, "PUT", f"/connectors/{ORDERS}/config", config)
        if answer.status != 200:
            raise AssertionError(f"PUT {ORDERS} config: {answer.status} {answer.body}")

    def delete_state(self, connector: str, tenant: str) -> None:
        """Once no runner lists ``tenant``, delete its state over REST and wait until it is
        gone from the offsets; then mark the events topic."""
        wait_for(
            lambda: all(
                tenant not in self.listed(connector, port, tenant) for port in self.ports()
            ),
            WAIT,
            f"no runner to list {connector}/{tenant}",
        )
        port = self.ports()[0]
        answer = call(port, "DELETE", f"/connectors/{connector}/partitions/{tenant}")
        if answer.status != 202:
            self.problems.append(
                f"DELETE {connector}/partitions/{tenant} of a removed tenant answered "
                f"{answer.status}: {answer.body}"
            )
            return
        wait_for(
            lambda: tenant not in self.offsets(connector, port),
            WAIT,
            f"the state of {connector}/{tenant} to be deleted",
        )
        topic = f"{self.pool.prefix}.events.{connector}"
        self.removals.append(Removal(connector, tenant, stable_offsets(self.pool.bootstrap, topic)))

    def listed(self, connector: str, port: int, tenant: str) -> set[str]:
        """The keys the runner at ``port`` lists (refreshed now); a runner that cannot tell
        yet (a 404 before it read the connector's config) counts as listing ``tenant``."""
        answer = call(port, "GET", f"/connectors/{connector}/partitions")
        if answer.status >= 500:
            self.problems.append(f"GET {connector} partitions answered {answer.status}")
        if answer.status != 200:
            return {tenant}
        return {entry["key"] for entry in answer.body}

    def offsets(self, connector: str, port: int) -> set[str]:
        answer = call(port, "GET", f"/connectors/{connector}/offsets")
        if answer.status != 200:
            raise AssertionError(f"GET {connector} offsets: {answer.status} {answer.body}")
        return {entry["partition"]["key"] for entry in answer.body["offsets"]}


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    tenants, items, rounds = (6, 200, 3) if full else (3, 15, 1)
    sim_a = ctx.simulator(tenants, items)
    sim_b = ctx.simulator(tenants + 2 * rounds, items, seed=11)
    poller = invoices(partitions={**invoices()["partitions"], "refresh": "1s"})
    with declarative_pool(ctx, "churn", sim_a, poller=poller) as pool:
        b_tenants = sim_b.tenants()
        churn = Churn(pool, sim_a, sim_b, b_tenants[:tenants], b_tenants[tenants:], items, full)
        churn.start("r1")
        created = call(
            churn.ports()[0],
            "POST",
            "/connectors",
            {"name": ORDERS, "config": connector_config(sim_b, churn.orders)},
        )
        if created.status != 201:
            raise AssertionError(f"POST /connectors: {created.status} {created.body}")
        watches = [
            EventWatch(pool.bootstrap, pool.prefix, POLLER_NAME),
            EventWatch(pool.bootstrap, pool.prefix, ORDERS),
        ]
        try:
            every = 0.02 if full else 0.05
            with Mutator(sim_a, every=every), Mutator(sim_b, every=every, seed=6):
                for round_ in range(rounds):
                    # The runners go 1 -> 2 -> 3 -> 2 -> 3 -> 2 -> 1; a change of tenants
                    # follows each step, while the group is still settling.
                    last = round_ == rounds - 1
                    steps: list[tuple[Callable[[], None], Callable[[], None]]] = [
                        (lambda: churn.start("r2"), churn.add_vendor_tenant),
                        (lambda: churn.start("r3"), churn.remove_vendor_tenant),
                        (lambda: churn.stop("r3"), churn.add_order_tenant),
                        (lambda: churn.start("r3"), churn.remove_order_tenant),
                        (lambda: churn.stop("r2", kill=full), churn.add_vendor_tenant),
                        (lambda: churn.stop("r3"), churn.remove_order_tenant),
                    ]
                    if not last:
                        steps.append((lambda: None, churn.add_order_tenant))
                    for change_runners, change_tenants in steps:
                        change_runners()
                        change_tenants()
            caught_up = catch_up(churn, watches)
        finally:
            for watch in watches:
                watch.close()
        codes = pool.stop_all()
        churn.problems += [
            f"{runner.name} exited with {codes[runner.name]} at the end"
            for runner in churn.live
            if codes[runner.name] not in (0, -signal.SIGTERM)
        ]
        verdict = judge(churn)
    return Result(
        scenario=NAME,
        rounds=rounds,
        events_verified=verdict.events_verified,
        duplicates=verdict.duplicates,
        losses=verdict.losses,
        aborted_seen=verdict.aborted_seen,
        recovery_s=caught_up,
        ok=verdict.ok and not churn.problems,
        problems=[*churn.problems, *verdict.summary()],
    )


def catch_up(churn: Churn, watches: list[EventWatch]) -> float:
    """Wait until every present tenant's items have their current versions' events."""
    began = time.monotonic()
    final_a = churn.sim_a.final_versions()
    final_b = {t: {i["id"]: i["etag"] for i in churn.sim_b.items(t)} for t in churn.orders}
    wait_for(
        lambda: watches[0].has_all(final_a) and watches[1].has_all(final_b),
        90,
        "both connectors to catch up",
    )
    return time.monotonic() - began


def judge(churn: Churn) -> Verdict:
    """The verifier on each connector's present tenants; the removed ones' own checks."""
    pool = churn.pool
    topics = [f"{pool.prefix}.{t}" for t in ("state", "items", "parked")]
    topics += [f"{pool.prefix}.events.{c}" for c in (POLLER_NAME, ORDERS)]
    hanging = settle_transactions(pool.bootstrap, topics, pool.session_timeout + 15)
    with ThreadPoolExecutor(3) as readers:  # each read waits on the broker, not the CPU
        reading = readers.submit(read_cursors, pool.bootstrap, pool.prefix)
        read = {
            c: readers.submit(read_events, pool.bootstrap, pool.prefix, c)
            for c in (POLLER_NAME, ORDERS)
        }
        cursors = reading.result()
    total = Verdict()
    for tp, (stable, high) in hanging.items():
        total.problem(f"{tp.topic}[{tp.partition}]: a transaction is hanging ({stable} < {high})")
    present = {
        POLLER_NAME: (churn.sim_a, churn.sim_a.tenants()),
        ORDERS: (churn.sim_b, list(churn.orders)),
    }
    for connector, (sim, tenants) in present.items():
        events, aborted = read[connector].result()
        total.aborted_seen += aborted
        finals = {t: {i["id"]: i["etag"] for i in sim.items(t)} for t in tenants}
        truth = {f"{connector}/{t}": TenantTruth(sim.served(t), finals[t]) for t in tenants}
        verdict = check([e for e in events if e.key in truth], truth, cursors)
        _merge(total, verdict)
        removed = {r.key: r for r in churn.removals if r.connector == connector}
        for key in sorted({e.key for e in events} - truth.keys() - removed.keys()):
            total.problem(f"{key}: events for a tenant the connector never listed")
        for key, removal in sorted(removed.items()):
            _judge_removed(removal, [e for e in events if e.key == key], cursors, total)
    return total


def _judge_removed(
    removal: Removal, events: list[SeenEvent], cursors: dict[str, Cursor | None], total: Verdict
) -> None:
    key = removal.key
    late = [e for e in events if e.offset >= removal.marks.get(e.partition, 0)]
    if late:
        total.problem(f"{key}: {len(late)} event(s) after its removal took effect")
    ordered = sorted(events, key=lambda e: (e.partition, e.offset))
    sequences = [e.sequence for e in ordered]
    if sequences != list(range(1, len(sequences) + 1)):
        total.problem(f"{key}: sequences {sequences[:8]}... are not 1..{len(sequences)}")
    pairs = [(e.subject, e.version) for e in ordered if e.type != "deleted"]
    repeated = len(pairs) - len(set(pairs))
    total.duplicates += repeated
    if repeated:
        total.problem(f"{key}: {repeated} version(s) published twice")
    total.events_verified += len(set(pairs))
    if cursors.get(key) is not None:
        total.problem(f"{key}: its state is still there after DELETE .../partitions/{{key}}")
    elif key not in cursors and events:
        total.problem(f"{key}: events but no state record, not even a tombstone")


def _merge(total: Verdict, verdict: Verdict) -> None:
    total.events_verified += verdict.events_verified
    total.duplicates += verdict.duplicates
    total.losses += verdict.losses
    total.superseded += verdict.superseded
    for problem in verdict.summary():
        total.problem(problem)
