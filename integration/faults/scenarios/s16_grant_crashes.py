"""A runner SIGKILLed between the provider's answer and the credential store's write (issue 45).

Two runners run the oauth connector of ``config/oauth.yaml`` (two streams, ``contacts`` and
``deals``, sharing each tenant's grant) on the simulator's identity provider, which rotates the
refresh token at every use and revokes the tenant's authorisation when a spent one comes back.
Access tokens live 4 s and are refreshed 2 s early, so every tenant's grant rotates every
2 seconds or so, and items change all along. In each round one runner is armed with
``crash@grant`` (:mod:`integration.faults.clients`): at its next rotated grant it ends (exit
137) right before the grant reaches ``<prefix>.credentials``. Its claim is on Kafka and the
provider has rotated: the grant it held is spent and the new one is gone. It is started again
at once, unarmed, as a supervisor would.

A SIGKILL loses every refresh the runner had in flight, not only the one it was struck in:
the victims of a round are the tenants whose first claim after their last grant record in
``<prefix>.credentials`` is the killed runner's (read at once, before anyone may settle them).
What must follow, and what it costs (the round's figures are the scenario's notes):

- no spent refresh token ever reaches the provider (``GET /_admin/identity``: no reuse), and
  no one calls the provider for a victim tenant again until a new grant is handed in;
- each victim tenant is reported: both its tasks ``NEEDS_AUTHORIZATION`` in REST status within
  ``lost_after`` and a margin of the kill, and the refresh counted ``lost`` in
  ``watukuy_grant_refreshes_total`` (or the ERROR line in a runner's log); meanwhile every
  other tenant keeps publishing;
- each is authorised again (``POST /_admin/identity/{tenant}/authorize``) and its new
  grant handed in with ``PUT /connectors/oauth/partitions/{tenant}/credentials``: its keys
  publish again;
- at the end, every version served on both streams has exactly one event (the verifier).

The tenants source refreshes once a minute, so the grant reaches the runners through the PUT
(the source would hand the same new grant a little later). Short profile: one round; full:
three, the runners taking turns as the victim.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from integration.faults.crashing import CRASH_EXIT
from integration.faults.harness import FaultContext, result
from integration.faults.report import Result
from integration.faults.scenarios.declarative import DeclarativePool, declarative_pool
from integration.faults.scenarios.rest_api import call, rest_port
from integration.faults.topics import Raw, read_raw
from integration.faults.vendor import Mutator, Simulator
from integration.faults.verify import TenantTruth, Verdict, verify
from integration.faults.watch import EventWatch
from integration.runners import RunnerProcess, wait_for
from integration.simulator.identity import CLIENT_ID, CLIENT_SECRET

NAME = "grant-crashes"
IN_CI = False  # its short profile takes about 30 s, and CI is near its 15-minute limit
CONNECTOR = "oauth"
STREAMS = {"contacts": "users", "deals": "items"}  # stream -> the simulator's collection
EXPIRES_IN = 4  # seconds an access token lives
REFRESH_EARLY = "2s"
LOST_AFTER = 6.0  # credentials.lost_after, seconds
REPORT_MARGIN = 20.0  # seconds past lost_after the report may take (a busy machine)
STRIKE_TIMEOUT = 60.0
LOST_LINE = "was never answered in the store"
_STRUCK = re.compile(r"injected fault: crash@grant of " + CONNECTOR + r"/(\S+),")


def connector() -> dict[str, Any]:
    """``config/oauth.yaml``'s connector, polled often, on the simulator of the runners'
    ``WATUKUY_VENDOR_URL``."""
    return {
        "name": CONNECTOR,
        "partitions": {
            "http": {
                "url": "${env:WATUKUY_VENDOR_URL}/oauth/tenants",
                "records": "tenants",
                "key": "id",
                "data": {"slug": "slug", "refresh_token": "refresh_token"},
            },
            "refresh": "1m",
        },
        "defaults": {
            "request": {
                "base": "${env:WATUKUY_VENDOR_URL}/oauth-api/{partition.data.slug}",
                "timeout": "5s",
                "auth": {
                    "oauth2": {
                        "grant": "refresh_token",
                        "token_url": "${env:WATUKUY_VENDOR_URL}/oauth/token",
                        "client_id": CLIENT_ID,
                        "client_secret": "${env:WATUKUY_OAUTH_CLIENT_SECRET}",
                        "client_auth": "basic",
                        "refresh_token": "{partition.data.refresh_token}",
                        "expires": {"path": "expires_in"},
                        "refresh_early": REFRESH_EARLY,
                    }
                },
            },
            "records": "data",
            "identity": "id",
            "version": "etag",
            "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            "cursor": {"token": {"path": "resume", "param": "cursor"}},
            "schedule": {"min": "250ms", "max": "1s"},
        },
        "streams": [{"name": name, "request": {"path": f"/{name}"}} for name in STREAMS],
    }


@dataclass
class Round:
    """One kill and what it cost."""

    runner: str
    struck: str  # the tenant whose grant write the crash struck
    tenants: list[str]  # every tenant whose refresh the kill lost
    killed_at: float  # monotonic
    reported_s: float | None = None  # kill -> their tasks all NEEDS_AUTHORIZATION in REST
    resumed_s: float | None = None  # hand-in -> each one's first event again (the slowest)
    calls_while_parked: int = 0  # provider calls for them between the kill and the hand-in

    def note(self) -> str:
        def shown(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f} s"

        return (
            f"{self.runner} killed at the write of {self.struck}'s rotated grant; refreshes "
            f"lost: {len(self.tenants)} ({', '.join(self.tenants)}); reported "
            f"{shown(self.reported_s)} after the kill (lost_after {LOST_AFTER:g} s), resumed "
            f"{shown(self.resumed_s)} after the hand-in, {self.calls_while_parked} provider "
            "call(s) for them in between"
        )


def run(ctx: FaultContext, profile: str) -> Result:
    rounds = 3 if profile == "full" else 1
    sim = ctx.simulator(4, 20)
    sim.call("POST", "/_admin/identity", {"expires_in": EXPIRES_IN})
    tenants = sim.tenants()
    env = {
        "WATUKUY_CREDENTIALS_KEY": base64.b64encode(os.urandom(32)).decode(),
        "WATUKUY_OAUTH_CLIENT_SECRET": CLIENT_SECRET,
    }
    sections = {
        "credentials": {
            "store": "kafka",
            "key": "${env:WATUKUY_CREDENTIALS_KEY}",
            "lost_after": f"{LOST_AFTER:g}s",
        }
    }
    problems: list[str] = []
    done: list[Round] = []
    with declarative_pool(
        ctx, "grants", sim, poller=connector(), sections=sections, env=env
    ) as pool:
        runners = [pool.add(name, faults=[]) for name in ("r1", "r2")]
        runners[0].arm(["--fault", "crash@grant,after=4"])
        for runner in runners:
            runner.start()
        watches = {s: ctx.watch(pool, poller=f"{CONNECTOR}.{s}") for s in STREAMS}
        with Mutator(sim, every=0.05) as mutator:
            for number in range(rounds):
                victim = runners[number % 2]
                if number:  # armed again: a clean restart first
                    victim.stop()
                    victim.arm(["--fault", "crash@grant,after=2"])
                    victim.start()
                survivor = runners[(number + 1) % 2]
                done.append(_round(sim, pool, victim, survivor, watches["deals"], tenants))
            mutator.stop()
            problems += [f"mutator: {e}" for e in mutator.errors[:3]]
        for stream, watch in watches.items():
            _caught_up(ctx, sim, watch, stream)
        codes = pool.stop_all()
        problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
        identity = sim.call("GET", "/_admin/identity")
        reuses = identity["reuses"]
        if reuses:
            problems.append(f"spent refresh tokens reached the provider: {reuses[:3]}")
        problems += [
            f"{r.tenants}: {r.calls_while_parked} provider call(s) while they needed authorising"
            for r in done
            if r.calls_while_parked
        ]
        verdict = _verify(pool, sim)
    notes = [r.note() for r in done]
    notes.append(
        f"{len(identity['calls'])} provider calls in all, "
        f"{sum(c['result'] != 'ok' for c in identity['calls'])} not ok"
    )
    print("\n".join(f"{NAME}: {n}" for n in notes), file=sys.stderr)
    reported = [r.resumed_s for r in done if r.resumed_s is not None]
    out = result(
        NAME,
        verdict,
        rounds=len(done),
        recovery_s=max(reported) if reported else None,
        problems=problems,
    )
    out.notes += notes
    return out


def _round(
    sim: Simulator,
    pool: DeclarativePool,
    victim: RunnerProcess,
    survivor: RunnerProcess,
    deals: EventWatch,
    tenants: list[str],
) -> Round:
    """Wait for ``victim``'s crash at a grant write; restart it; time the report; hand a new
    grant in; time the resume."""
    wait_for(lambda: not victim.running, STRIKE_TIMEOUT, f"{victim.name}'s crash at a grant")
    killed_at = time.monotonic()
    code = victim.wait(5)
    struck = _STRUCK.findall(victim.since_start())
    if code != CRASH_EXIT or not struck:
        raise RuntimeError(f"{victim.name} exited with {code}, not at a grant's write")
    lost = lost_refreshes(pool.bootstrap, pool.prefix, victim.runner_id)
    if struck[-1] not in lost:
        raise RuntimeError(f"{struck[-1]}'s claim by {victim.name} is not the last: {lost}")
    calls_before = {t: _calls(sim, t) for t in lost}  # the lost refreshes' calls included
    victim.arm([])
    victim.start()  # as a supervisor would, unarmed
    rnd = Round(victim.name, struck[-1], sorted(lost), killed_at)
    survivor.wait_started()
    port = rest_port(survivor)
    deadline = LOST_AFTER + REPORT_MARGIN
    for tenant in rnd.tenants:
        wait_for(partial(_parked, port, tenant), deadline, f"{tenant}'s tasks parked")
    reported_at = time.monotonic()
    rnd.reported_s = reported_at - killed_at
    victim.wait_started()
    for tenant in rnd.tenants:
        if not _lost_counted(pool, tenant):
            raise RuntimeError(f"the lost refresh of {tenant} was neither counted nor logged")
    others = {f"{CONNECTOR}.deals/{t}" for t in tenants if t not in lost}
    for key in sorted(others):  # the other tenants keep publishing
        wait_for(partial(deals.first_after, reported_at, {key}), 30, f"an event of {key}")
    resumed: list[float] = []
    for tenant in rnd.tenants:
        grant = sim.call("POST", f"/_admin/identity/{tenant}/authorize")["refresh_token"]
        rnd.calls_while_parked += _calls(sim, tenant) - calls_before[tenant]
        handed_at = time.monotonic()
        path = f"/connectors/{CONNECTOR}/partitions/{tenant}/credentials"
        answer = call(port, "PUT", path, {"refresh_token": grant})
        if answer.status != 202:
            raise RuntimeError(f"PUT {path} answered {answer.status}: {answer.body}")
        keys = {f"{CONNECTOR}.deals/{tenant}"}
        at = wait_for(partial(deals.first_after, handed_at, keys), 30, f"{tenant} to resume")
        resumed.append(at - handed_at)
    rnd.resumed_s = max(resumed)
    return rnd


def lost_refreshes(bootstrap: str, prefix: str, runner_id: str) -> set[str]:
    """The tenants of :data:`CONNECTOR` whose refresh ``runner_id`` claimed and never saved:
    in ``<prefix>.credentials``, the first claim after the tenant's last grant record is that
    runner's. Read it before ``lost_after`` passes (a lost refresh is then settled by a grant
    record of its own)."""
    return lost_in(read_raw(bootstrap, [f"{prefix}.credentials"], timeout=30), runner_id)


def lost_in(records: Sequence[Raw], runner_id: str) -> set[str]:
    """:func:`lost_refreshes` on the records of the topic (offset order per partition; a
    tenant's records are all in one partition)."""
    first_claim: dict[str, str | None] = {}  # tenant -> the runner of its first claim since
    for record in records:
        key = (record.key or b"").decode()
        if key.startswith(f"grant/{CONNECTOR}/"):
            first_claim[key.removeprefix(f"grant/{CONNECTOR}/")] = None
        elif key.startswith(f"claim/{CONNECTOR}/") and record.value is not None:
            tenant = key.removeprefix(f"claim/{CONNECTOR}/").rpartition("/")[0]
            if first_claim.get(tenant) is None:
                first_claim[tenant] = json.loads(record.value)["runner"]
    return {tenant for tenant, runner in first_claim.items() if runner == runner_id}


def _calls(sim: Simulator, tenant: str) -> int:
    """The provider's token calls for ``tenant`` so far (the admin route's are not counted)."""
    return sum(1 for c in sim.call("GET", "/_admin/identity")["calls"] if c["tenant"] == tenant)


def _parked(port: int, tenant: str) -> bool:
    """Both of ``tenant``'s tasks are NEEDS_AUTHORIZATION in the connector's REST status."""
    answer = call(port, "GET", f"/connectors/{CONNECTOR}/status")
    if answer.status != 200:
        return False
    states = [t["state"] for t in answer.body["tasks"] if t["partition"] == tenant]
    return len(states) == len(STREAMS) and set(states) == {"NEEDS_AUTHORIZATION"}


def _lost_counted(pool: DeclarativePool, tenant: str) -> bool:
    """A runner counted a ``lost`` refresh in its metrics, or logged the lost refresh."""
    for runner in pool.runners.values():
        if f"{CONNECTOR}/{tenant}: a refresh claimed" in runner.output():
            return True
        if not runner.running:
            continue
        answer = call(rest_port(runner), "GET", "/metrics")
        for line in str(answer.body).splitlines():
            counted = line.startswith("watukuy_grant_refreshes_total") and 'result="lost"' in line
            if counted and float(line.rsplit(" ", 1)[1]) >= 1:
                return True
    return False


def _finals(sim: Simulator, collection: str) -> dict[str, dict[str, str]]:
    listed = {
        t: sim.call("GET", f"/_admin/tenants/{t}/{collection}")["data"] for t in sim.tenants()
    }
    return {t: {r["id"]: r["etag"] for r in records} for t, records in listed.items()}


def _served(sim: Simulator, tenant: str, collection: str) -> list[tuple[str, str]]:
    path = f"/_admin/tenants/{tenant}/served?collection={collection}"
    return [(s["id"], s["version"]) for s in sim.call("GET", path)]


def _caught_up(ctx: FaultContext, sim: Simulator, watch: EventWatch, stream: str) -> None:
    finals = _finals(sim, STREAMS[stream])
    try:
        wait_for(lambda: watch.has_all(finals), 90, f"{stream} to catch up")
    except TimeoutError as exc:
        ctx.dump_stacks()
        raise TimeoutError(f"{exc}: missing e.g. {watch.missing(finals)[:3]}") from None


def _verify(pool: DeclarativePool, sim: Simulator) -> Verdict:
    """The verifier on each stream's events topic; one verdict of both."""
    verdict = Verdict()
    for stream, collection in STREAMS.items():
        poller = f"{CONNECTOR}.{stream}"
        finals = _finals(sim, collection)
        truth: Mapping[str, TenantTruth] = {
            f"{poller}/{t}": TenantTruth(_served(sim, t, collection), finals.get(t))
            for t in sim.known_tenants()
        }
        one = verify(
            pool.bootstrap,
            pool.prefix,
            truth,
            poller=poller,
            transaction_timeout=pool.session_timeout,
        )
        verdict.events_verified += one.events_verified
        verdict.duplicates += one.duplicates
        verdict.losses += one.losses
        verdict.superseded += one.superseded
        verdict.aborted_seen += one.aborted_seen
        for problem in one.summary():
            verdict.problem(f"{stream}: {problem}")
    return verdict
