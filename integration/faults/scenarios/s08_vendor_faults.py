"""Vendor faults per tenant: a 5xx storm, timeouts (answers slower than ``request.timeout``),
malformed JSON bodies and 429s with ``Retry-After``, each on a tenant of its own while the
others are healthy and items change everywhere.

What must hold, watched through each runner's ``GET /healthz`` (the REST view of its keys):

- the storm, timeout and malformed-JSON tenants' circuits open (and close again once the
  vendor heals); no other tenant's circuit ever opens;
- the 429 tenant is paced, not failed: its circuit stays closed and it asks no more often than
  ``Retry-After`` allows (counted at the simulator);
- every healthy tenant's lag stays within its schedule (``schedule.max`` plus a margin for a
  busy machine) all along;
- afterwards the verifier passes: every served version published once, in sequence.

Full profile: 3 rounds of 25 s storms on 12 tenants (two of each fault, a ``fail_next`` burst,
three healthy); short: one round of 8 s on 6 tenants.
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from integration.faults.harness import POLLER_NAME, FaultContext, result
from integration.faults.report import Result
from integration.faults.scenarios.declarative import declarative_pool, invoices
from integration.faults.vendor import Mutator, Simulator
from integration.runners import RunnerProcess, wait_for

NAME = "vendor-faults"
TIMEOUT_S = 2.0  # request.timeout of the poller
SCHEDULE_MAX_S = 1.0
LAG_MARGIN_S = 4.0  # a poll, a commit and a busy machine on top of schedule.max
RETRY_AFTER_S = 3
_PORT = re.compile(r"REST on port (\d+)")

# The faults by role; each is set with ``heal_after`` = the storm's length.
FAULTS: dict[str, dict[str, Any]] = {
    "5xx": {"error_rate": 1.0, "fail_status": 503},
    "timeout": {"delay": TIMEOUT_S + 1.5},
    "malformed": {"malformed_json": True},
    "429": {"error_rate": 1.0, "fail_status": 429, "retry_after": RETRY_AFTER_S},
    "burst": {"fail_next": 6, "fail_status": 500},
}
OPENS = {"5xx", "timeout", "malformed", "burst"}


@dataclass
class Seen:
    """What the healthz samples showed of one tenant."""

    circuits: set[str] = field(default_factory=set)
    max_lag: float = 0.0
    throttled: bool = False


class HealthWatch:
    """Samples every runner's ``/healthz`` twice a second in a thread."""

    def __init__(self, runners: list[RunnerProcess]) -> None:
        self.runners = runners
        self.seen: dict[str, Seen] = defaultdict(Seen)
        self.samples = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-watch", daemon=True)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def reset(self) -> None:
        self.seen.clear()

    def keys(self) -> dict[str, dict[str, Any]]:
        """Every key of every running runner, by tenant, as healthz reports it now."""
        out: dict[str, dict[str, Any]] = {}
        for runner in self.runners:
            port = rest_port(runner)
            if port is None or not runner.running:
                continue
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    body = json.loads(r.read())
            except OSError as exc:
                if len(self.errors) < 5:
                    self.errors.append(f"{runner.name}: /healthz: {exc}")
                continue
            out |= {k["partition"]: k for k in body["keys"] if k["poller"] == POLLER_NAME}
        return out

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for tenant, key in self.keys().items():
                seen = self.seen[tenant]
                seen.circuits.add(key["circuit"])
                if key.get("lag") is not None:
                    seen.max_lag = max(seen.max_lag, float(key["lag"]))
                seen.throttled |= key.get("throttled_until") is not None
            self.samples += 1


def rest_port(runner: RunnerProcess) -> int | None:
    found = _PORT.search(runner.since_start())
    return int(found.group(1)) if found else None


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    rounds, storm = (3, 25.0) if full else (1, 8.0)
    roles = ["5xx", "timeout", "malformed", "429"] * (2 if full else 1)
    roles += ["burst"] if full else []
    healthy = 3 if full else 2
    sim = ctx.simulator(len(roles) + healthy, 40)
    tenants = sim.tenants()
    role_of = dict(zip(tenants, roles, strict=False))
    poller = invoices(
        request=invoices()["request"] | {"timeout": f"{TIMEOUT_S:g}s"},
        schedule={"min": "250ms", "max": f"{SCHEDULE_MAX_S:g}s"},
        circuit={"failure_threshold": 2, "cooldown": "1s", "max_cooldown": "2s"},
    )
    problems: list[str] = []
    recoveries: list[float] = []
    with declarative_pool(ctx, "vendor", sim, poller=poller) as pool:
        runners = pool.start(2 if full else 1)
        watch = ctx.watch(pool)
        ctx.caught_up(pool, watch)
        with Mutator(sim, every=0.05), HealthWatch(runners) as health:
            for round_ in range(rounds):
                health.reset()
                before = requests(sim)
                for tenant, role in role_of.items():
                    sim.set_faults(tenant, heal_after=storm, **FAULTS[role])
                time.sleep(storm)
                during = {t: n - before.get(t, 0) for t, n in requests(sim).items()}
                healed = time.monotonic()
                closed = healed_in_time(health, tenants, 60)
                recoveries.append(time.monotonic() - healed)
                where = f"round {round_ + 1}"
                problems += judge(where, health, role_of, tenants, during, storm, closed)
                print(summary(where, health, role_of, tenants, during), file=sys.stderr)
        ctx.caught_up(pool, watch)
        codes = pool.stop_all()
        problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
        problems += health.errors if health.samples == 0 else []
        verdict = ctx.verify(pool)
    return result(
        NAME,
        verdict,
        rounds=rounds,
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )


def requests(sim: Simulator) -> dict[str, int]:
    counts: dict[str, int] = sim.call("GET", "/_admin/stats")["tenants"]
    return counts


def healed_in_time(health: HealthWatch, tenants: list[str], timeout: float) -> bool:
    """Whether every tenant's circuit is closed again within ``timeout`` seconds."""

    def closed() -> bool:
        keys = health.keys()
        return all(keys.get(t, {}).get("circuit") == "closed" for t in tenants)

    try:
        return wait_for(closed, timeout, "every circuit to close again")
    except TimeoutError:
        return False


def summary(
    where: str,
    health: HealthWatch,
    role_of: dict[str, str],
    tenants: list[str],
    during: dict[str, int],
) -> str:
    opened = sorted(
        f"{t}({role_of.get(t, 'healthy')})" for t in tenants if "open" in health.seen[t].circuits
    )
    lags = [health.seen[t].max_lag for t in tenants if t not in role_of]
    paced = {t: during.get(t, 0) for t, role in role_of.items() if role == "429"}
    return (
        f"{NAME}: {where}: {health.samples} healthz samples; circuits opened: {', '.join(opened)}; "
        f"healthy max lag {max(lags, default=0):.1f}s; 429 tenants' requests {paced}"
    )


def judge(
    where: str,
    health: HealthWatch,
    role_of: dict[str, str],
    tenants: list[str],
    during: dict[str, int],
    storm: float,
    closed: bool,
) -> list[str]:
    problems = []
    if health.samples < 4:
        problems.append(f"{where}: /healthz answered {health.samples} times: {health.errors}")
    for tenant in tenants:
        role, seen = role_of.get(tenant), health.seen.get(tenant, Seen())
        opened = "open" in seen.circuits
        if role in OPENS and not opened:
            problems.append(f"{where}: {tenant} ({role}): its circuit never opened")
        if role not in OPENS and opened:
            problems.append(f"{where}: {tenant} ({role or 'healthy'}): its circuit opened")
        if role == "429":
            # One try at the start, at most one per Retry-After, and one that was on its way
            # as the storm began. Unpaced, its schedule (<= 1s) would ask storm/1s times.
            allowed = math.ceil(storm / RETRY_AFTER_S) + 2
            if during.get(tenant, 0) > allowed:
                problems.append(
                    f"{where}: {tenant} (429): {during[tenant]} requests in {storm:g}s, "
                    f"Retry-After {RETRY_AFTER_S}s allows {allowed}"
                )
        if role is None and seen.max_lag > SCHEDULE_MAX_S + LAG_MARGIN_S:
            problems.append(
                f"{where}: healthy {tenant} lagged {seen.max_lag:.1f}s "
                f"(schedule.max {SCHEDULE_MAX_S:g}s + {LAG_MARGIN_S:g}s)"
            )
    if not closed:
        problems.append(f"{where}: circuits still open after the vendor healed")
    return problems
