"""Per-tenant refresh-token grants (issue 45) on two real runner processes, the real broker and
the standalone simulator's identity provider, which rotates the refresh token at every use and
revokes a tenant when a spent one comes back. Access tokens live 2 s, so every tenant's grant
rotates every few seconds while one runner is stopped (SIGTERM) and started again and the
other is SIGKILLed and started again; the tenants source hands out each tenant's first grant,
long spent, all along. What a user sees: the provider never saw a spent grant again, every
tenant's grant rotated again and again, every change was published exactly once, no key ever
needed authorising, and no token is in the runners' logs or on any topic. A runner given a key
that cannot read the stored grants stops at start with a config error naming the setting."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from integration.faults.topics import read_raw
from integration.faults.verify import TenantTruth, verify
from integration.simulator.identity import CLIENT_ID, CLIENT_SECRET
from tests.integration.runners import ROOT, Runner, admin, runner_env, wait_for
from watukuy.control.keystatus import KeyStatus, decode_record
from watukuy.core.grants import GrantRef, handed_in
from watukuy.core.lifecycle import TaskState
from watukuy.store.credentials.cipher import Cipher
from watukuy.store.kafka.credential_records import CLAIM, GRANT
from watukuy.store.kafka.credentials import KafkaCredentials
from watukuy.store.kafka.topics import TopicLayout

TENANTS = 3
ITEMS = 4
LIFETIME = 2  # seconds an access token lives; refreshed 1 s early: a rotation every ~1-2 s
CONNECTOR = "oauth"
STREAMS = {"contacts": "users", "deals": "items"}  # stream -> the simulator's collection
# What the simulator's tokens look like (``secrets.token_urlsafe(24)``): any of them, known to
# the test or not, is caught wherever it shows.
TOKEN = re.compile(rb"\b[ar]t_[A-Za-z0-9_-]{32}")
CONFIG_ERROR = 2  # watukuy.cli.EXIT_CONFIG


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS, "--token-expires-in", str(LIFETIME))


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def oauth_config(bootstrap: str, prefix: str, name: str) -> dict[str, Any]:
    """``config/oauth.yaml`` on this broker and prefix: quick polls, a refresh 1 s before a
    token expires, the key from the environment (never in the file)."""
    example = yaml.safe_load((ROOT / "config" / "oauth.yaml").read_text())
    (connector,) = example["pollers"]
    connector["defaults"]["request"]["auth"]["oauth2"]["refresh_early"] = "1s"
    connector["defaults"]["schedule"] = {"min": "1s", "max": "2s"}
    config = runner_config(bootstrap, prefix, name, example=example)
    config["runner"]["session.timeout"] = "6s"
    config["credentials"] = {"store": "kafka", "key": "${env:WATUKUY_CREDENTIALS_KEY}"}
    return config


def oauth_runner(
    bootstrap: str, prefix: str, vendor: str, tmp: Path, name: str, key: str, *, debug: bool = True
) -> Runner:
    path = write_runner_config(tmp / f"{name}.yaml", oauth_config(bootstrap, prefix, name))
    env = runner_env(
        vendor,
        WATUKUY_CREDENTIALS_KEY=key,
        WATUKUY_OAUTH_CLIENT_ID=CLIENT_ID,
        WATUKUY_OAUTH_CLIENT_SECRET=CLIENT_SECRET,
    )
    return Runner(name, path, env, tmp / f"{name}.log", debug=debug)


def identity(simulator: Simulator) -> dict[str, Any]:
    shown: dict[str, Any] = admin(simulator, "/identity")
    return shown


def rotations(simulator: Simulator) -> Counter[str]:
    """Each tenant's successful refreshes so far; none may have presented a spent grant."""
    shown = identity(simulator)
    assert shown["reuses"] == [], shown["reuses"]  # the provider revoked those tenants
    return Counter(c["tenant"] for c in shown["calls"] if c["result"] == "ok")


class Churn:
    """Changes one item and one user of every tenant at each call: what must be published."""

    def __init__(self, simulator: Simulator, tenants: list[str]) -> None:
        self.simulator = simulator
        self.tenants = tenants
        self.records = {
            (t, c): [r["id"] for r in admin(simulator, f"/tenants/{t}/{c}")["data"]]
            for t in tenants
            for c in STREAMS.values()
        }
        self.changes = 0

    def __call__(self) -> None:
        for (tenant, collection), ids in self.records.items():
            record = ids[self.changes % len(ids)]
            field = "status" if collection == "items" else "name"
            change = {field: f"change {self.changes}"}
            admin(self.simulator, f"/tenants/{tenant}/{collection}/{record}", change, "PATCH")
        self.changes += 1


def rotated_while_changing(
    simulator: Simulator, churn: Churn, times: int, what: str, timeout: float = 60
) -> None:
    """Until every tenant's grant rotated ``times`` more times, with changes meanwhile."""
    before = rotations(simulator)

    def done() -> bool:
        churn()
        now = rotations(simulator)
        return all(now[t] - before[t] >= times for t in churn.tenants)

    wait_for(done, timeout, what, step=1.0)


def outstanding_claims(bootstrap: str, prefix: str, runner: str) -> list[str]:
    """The tenants whose grant ``runner`` is refreshing now, as ``<prefix>.credentials`` says:
    its claim is the first for a serial and no grant was written after it."""
    last_grant: dict[str, int] = {}
    first_claims: dict[tuple[str, str], tuple[int, str]] = {}
    for record in read_raw(bootstrap, [f"{prefix}.credentials"], committed=False):
        key = (record.key or b"").decode()
        if key.startswith(GRANT):
            last_grant[key.removeprefix(GRANT)] = record.offset
        elif key.startswith(CLAIM) and record.value is not None:
            tenant, _, serial = key.removeprefix(CLAIM).rpartition("/")
            owner = json.loads(record.value)["runner"]
            first_claims.setdefault((tenant, serial), (record.offset, owner))
    return sorted(
        tenant
        for (tenant, _), (offset, owner) in first_claims.items()
        if owner == runner and offset > last_grant.get(tenant, -1)
    )


def kill_between_refreshes(runner: Runner, bootstrap: str, prefix: str) -> int:
    """SIGKILL ``runner`` at a moment it is refreshing no grant (stopped, the credentials
    topic read, resumed and tried again while it is): the kill cannot lose a refresh. The
    attempts it took."""
    for attempt in range(1, 21):
        runner.pause()
        time.sleep(0.5)  # what it sent before the stop reaches the broker
        if not outstanding_claims(bootstrap, prefix, runner.runner_id):
            runner.kill()
            return attempt
        runner.resume()
        time.sleep(0.3)
    raise AssertionError(f"{runner.name} was refreshing a grant at every try")


def statuses(bootstrap: str, prefix: str) -> Iterator[KeyStatus]:
    """Every key status ever written to ``<prefix>.status`` (REST's task states)."""
    for record in read_raw(bootstrap, [f"{prefix}.status"]):
        decoded = decode_record(record.key, record.value)
        if decoded is not None and isinstance(decoded.value, KeyStatus):
            yield decoded.value


def truth(simulator: Simulator, tenants: list[str], stream: str) -> dict[str, TenantTruth]:
    """What the vendor served each tenant on ``stream`` and holds at the end, by record key."""
    collection = STREAMS[stream]
    out = {}
    for tenant in tenants:
        served = admin(simulator, f"/tenants/{tenant}/served?collection={collection}")
        final = admin(simulator, f"/tenants/{tenant}/{collection}")["data"]
        out[f"{CONNECTOR}.{stream}/{tenant}"] = TenantTruth(
            [(s["id"], s["version"]) for s in served], {r["id"]: r["etag"] for r in final}
        )
    return out


def served_all(simulator: Simulator, tenants: list[str]) -> bool:
    """The vendor served every record's current version to a poll (the runners' graceful
    stop commits the page it is on; the verdict then reads what reached Kafka)."""
    for stream in STREAMS:
        for held in truth(simulator, tenants, stream).values():
            if not set((held.final or {}).items()) <= set(held.served):
                return False
    return True


def tokens_in(data: bytes, known: list[str]) -> list[str]:
    """The token texts in ``data`` (shortened: the test's own output shows none either)."""
    found = [m.decode()[:6] + "..." for m in TOKEN.findall(data)]
    return found + [k[:6] + "..." for k in known if k.encode() in data]


def test_two_runners_keep_rotating_grants_through_a_stop_and_a_kill_never_reusing_one(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    tenants = [t["id"] for t in simulator.tenants]
    with urllib.request.urlopen(f"{simulator.base_url}/oauth/tenants", timeout=10) as answer:
        listed = json.loads(answer.read())["tenants"]  # as the tenants source reads it
    first_grants = [t["refresh_token"] for t in listed]
    key = new_key()
    a, b = (
        oauth_runner(kafka_bootstrap, prefix, simulator.base_url, tmp_path, name, key)
        for name in ("creds-a", "creds-b")
    )
    churn = Churn(simulator, tenants)
    a.start()
    b.start()
    try:
        rotated_while_changing(simulator, churn, 3, "three rotations on both runners", 90)
        assert a.stop() == 0, a.output()
        a.start()
        rotated_while_changing(simulator, churn, 2, "two rotations after the SIGTERM")
        tries = kill_between_refreshes(b, kafka_bootstrap, prefix)
        b.start()
        rotated_while_changing(simulator, churn, 2, "two rotations after the SIGKILL")
        wait_for(lambda: served_all(simulator, tenants), 60, "every change polled", step=0.5)
        assert a.running and b.running, a.output() + b.output()
    finally:
        stopped = [a.stop(), b.stop()]
    assert stopped == [0, 0], a.output() + b.output()
    # Stopped, the topic read, resumed while it held a claim: the SIGKILL landed between
    # refreshes, so none could be lost (the lost-refresh path is the engine tests').
    print(f"SIGKILL of {b.name} at try {tries}, between its refreshes")

    shown = identity(simulator)
    assert shown["reuses"] == []  # no spent refresh token was ever presented again
    assert {c["result"] for c in shown["calls"]} == {"ok"}, shown["calls"]
    assert all(not state["revoked"] for state in shown["tenants"].values()), shown["tenants"]
    done = rotations(simulator)
    assert all(done[t] >= 6 for t in tenants), done

    with ThreadPoolExecutor() as pool:  # each read is a consumer waiting for the broker
        verdicts = {
            stream: pool.submit(
                verify,
                kafka_bootstrap,
                prefix,
                truth(simulator, tenants, stream),
                poller=f"{CONNECTOR}.{stream}",
                transaction_timeout=6.0,
            )
            for stream in STREAMS
        }
        written = pool.submit(lambda: list(statuses(kafka_bootstrap, prefix)))
        on_topics = pool.submit(
            read_raw,
            kafka_bootstrap,
            [f"{prefix}.{t}" for t in ("credentials", "state", "items", "status")]
            + [f"{prefix}.events.{CONNECTOR}.{s}" for s in STREAMS],
            committed=False,
        )
    for stream, verdict in verdicts.items():
        assert verdict.result().ok, (stream, verdict.result().summary())
        assert verdict.result().events_verified >= TENANTS * ITEMS, (stream, verdict.result())
    keys = {(s.poller, s.partition) for s in written.result()}
    assert len(keys) == TENANTS * len(STREAMS), keys
    assert [s for s in written.result() if s.state is TaskState.NEEDS_AUTHORIZATION] == []
    topics = on_topics.result()
    grants = [r for r in topics if r.topic.endswith(".credentials") and r.key is not None]
    assert any(r.key is not None and r.key.startswith(GRANT.encode()) for r in grants)
    for record in topics:
        data = (record.key or b"") + (record.value or b"")
        assert tokens_in(data, first_grants) == [], (record.topic, record.key)
    for runner in (a, b):
        log = runner.output()
        assert tokens_in(log.encode(), first_grants) == [], runner.name
        assert "needs authorising again" not in log, runner.name
        assert key not in log, runner.name


def test_a_runner_given_a_key_that_cannot_read_the_stored_grants_stops_at_start(
    kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    written_with, other = new_key(), new_key()
    layout = TopicLayout(prefix, partitions=4, replication_factor=1)

    async def hand_in() -> None:  # the grant a runner with ``written_with`` rotated and saved
        store = KafkaCredentials(
            {"bootstrap.servers": kafka_bootstrap},
            layout,
            Cipher([base64.b64decode(written_with)]),
        )
        await store.start()
        try:
            await store.save(GrantRef(CONNECTOR, "t1"), handed_in("rt_" + "x" * 32, time.time()))
        finally:
            await store.close()

    asyncio.run(hand_in())
    vendor = "http://127.0.0.1:9"  # never reached: the runner stops before its first poll
    for name, key, setting in (
        ("wrong-key", other, "credentials.keys"),
        ("bad-key", "not a key at all", "credentials.key"),
    ):
        # Without --debug, as deployed: the error and no trace.
        runner = oauth_runner(kafka_bootstrap, prefix, vendor, tmp_path, name, key, debug=False)
        began = time.monotonic()
        runner.start()
        assert runner.wait(60) == CONFIG_ERROR, runner.output()
        took = time.monotonic() - began
        log = runner.output()
        assert setting in log, log
        assert key not in log, log
        assert "Traceback" not in log, log
        print(f"{name}: exit {CONFIG_ERROR} after {took:.1f}s: {log.strip().splitlines()[-1]}")
        assert took < 30, took
