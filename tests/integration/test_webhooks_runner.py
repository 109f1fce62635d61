"""Webhooks wake tenants (issue 46) on two real runner processes, the real broker and the
simulator's signed webhooks, with ``config/tracker.yaml``'s connector on a 15-minute schedule:
only a webhook can make a change show up within seconds.

What a user sees: each change the vendor announces, to either runner, is readable on its topic
within a few seconds, exactly once, though ``rest.auth`` guards every other route; a webhook
with a bad or missing signature is 401 and wakes nothing, one for an unknown tenant 202; no
webhook body reaches a runner's log. And a webhook answered 202 by one runner while the key's
owner is stopped, the owner then SIGKILLed, is polled by the key's next owner: the change is
published once, and a change nobody announced is not (the takeover alone polls nothing).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from integration.demo_pieces import committed_reader, wait_for_topic
from integration.simulator.webhooks import signature
from tests.integration.kafka_support import in_sequence
from tests.integration.runners import ROOT, Runner, admin, free_port, runner_env, wait_for
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder

TENANTS = 3  # the first two send their webhooks themselves, the third's the test sends
SECRET = "hook-secret-of-the-test"
TOKEN = "rest-token-of-the-test"
PATH = "/webhooks/tracker"  # config/tracker.yaml's
STREAMS = ("projects", "issues", "comments", "users")
BOUND = 10.0  # seconds from a change at the vendor to its event on Kafka; ~1 s is usual
# A string only in the bodies of the webhooks the test sends: never in a runner's log.
MARKER = f"webhook-body-{uuid.uuid4().hex}"


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    sim = simulator_process(
        TENANTS, 1, "--projects", "2", "--issues", "2", "--comments", "1", "--users", "2"
    )
    for tenant in (t["id"] for t in sim.tenants):  # every project and issue is published
        for project in records(sim, tenant, "projects"):
            admin(sim, f"/tenants/{tenant}/projects/{project['id']}", {"archived": False}, "PATCH")
        for issue in records(sim, tenant, "issues"):
            fields = {"status": "open", "spam": False}
            admin(sim, f"/tenants/{tenant}/issues/{issue['id']}", fields, "PATCH")
    return sim


def records(sim: Simulator, tenant: str, collection: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = admin(sim, f"/tenants/{tenant}/{collection}")["data"]
    return found


def http(
    url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """POST ``body`` (GET without one); the status and body of the answer, errors too."""
    request = urllib.request.Request(url, body, headers or {}, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@dataclass
class Instance:
    """A runner of the tracker connector and its REST port, on which webhooks are served."""

    runner: Runner
    port: int

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PATH}"

    def get(self, path: str) -> Any:
        status, body = http(f"http://127.0.0.1:{self.port}{path}", None, bearer())
        assert status == 200, (path, status, body)
        return body if path == "/metrics" else json.loads(body)

    def healthy(self) -> bool:
        try:
            return http(f"http://127.0.0.1:{self.port}/health", None, bearer())[0] == 200
        except OSError:
            return False

    def owned(self) -> dict[str, dict[str, Any]]:
        """The keys it polls now (``/healthz``), by key text."""
        return {f"{k['poller']}/{k['partition']}": k for k in self.get("/healthz")["keys"]}

    def send(self, hook: dict[str, Any], tenant: str, secret: str = SECRET) -> int:
        """A webhook signed as the simulator signs it (GitHub's HMAC); its answer's status."""
        body = json.dumps(hook).encode()
        headers = {"Content-Type": "application/json", "X-Tenant": tenant}
        headers |= signature("hmac", secret, body, time.time())
        return http(self.hook_url, body, headers)[0]

    def webhooks_counted(self) -> Counter[str]:
        """``watukuy_webhooks_total`` by result."""
        counted: Counter[str] = Counter()
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith("watukuy_webhooks_total{"):
                labels, _, value = line.partition("} ")
                result = labels.split('result="')[1].split('"')[0]
                counted[result] += int(float(value))
        return counted


def bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def tracker(bootstrap: str, prefix: str, name: str, port: int) -> dict[str, Any]:
    """``config/tracker.yaml`` on this broker: polls every 15 minutes, REST behind a token."""
    example = yaml.safe_load((ROOT / "config" / "tracker.yaml").read_text())
    (connector,) = example["pollers"]
    connector["defaults"]["schedule"] = {"min": "15m", "max": "15m"}
    config = runner_config(bootstrap, prefix, name, example=example)
    config["runner"]["session.timeout"] = "3s"  # a dead runner's keys move within seconds
    auth = {"tokens": ["${env:WATUKUY_REST_TOKEN}"]}
    config["rest"] = {"listen": f"127.0.0.1:{port}", "auth": auth}
    return config


@pytest.fixture
def pair(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> Iterator[tuple[Instance, Instance]]:
    env = runner_env(
        simulator.base_url,
        TRACKER_HOOK_SECRET=SECRET,
        WATUKUY_PII_KEY="pii-key-of-the-test",
        WATUKUY_REST_TOKEN=TOKEN,
    )
    started = []
    for name in ("hooks-a", "hooks-b"):
        port = free_port()
        config = tracker(kafka_bootstrap, prefix, name, port)
        path = write_runner_config(tmp_path / f"{name}.yaml", config)
        runner = Runner(name, path, env, tmp_path / f"{name}.log")
        runner.start()
        started.append(Instance(runner, port))
    a, b = started
    try:
        for one in (a, b):
            wait_for(one.healthy, 60, f"{one.runner.name}'s /health")
        yield a, b
    finally:  # a runner the test killed is not stopped (a test ends with both running)
        codes = {one.runner.name: one.runner.stop() for one in (a, b) if one.runner.running}
        for one in (a, b):  # no webhook body, and not the secret, in any log
            log = one.runner.output()
            assert MARKER not in log and SECRET not in log, one.runner.name
        assert set(codes.values()) <= {0}, (codes, a.runner.output() + b.runner.output())


@dataclass
class Tail:
    """Every event on the tracker's topics as soon as it is readable (read_committed), and
    when it was read (``time.monotonic()``)."""

    bootstrap: str
    prefix: str
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        topics = [f"{self.prefix}.events.tracker.{stream}" for stream in STREAMS]
        parts = {t: wait_for_topic(self.bootstrap, t, 60) or [] for t in topics}
        assert all(parts.values()), parts
        self._consumer = committed_reader(self.bootstrap, topics[0], parts[topics[0]], timing=True)
        self._consumer.incremental_assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics[1:] for p in parts[t]]
        )
        self._resolver = SchemaTopicResolver(self.bootstrap, f"{self.prefix}.schemas")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        decode = event_decoder(resolve=self._resolver)
        while not self._stop.is_set():
            message = self._consumer.poll(0.05)
            value = None if message is None or message.error() else message.value()
            if value is None:
                continue
            event = decode(value).to_dict()
            with self._lock:
                self.events.append((time.monotonic(), event))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
        self._resolver.close()

    def by_key(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        with self._lock:
            for _, event in self.events:
                out.setdefault(f"{event['poller']}/{event['partition']}", []).append(event)
        return out

    def read_at(self, key: str, subject: str, version: str) -> float | None:
        """When the event of ``subject`` at ``version`` on ``key`` was read, if it was."""
        with self._lock:
            for at, event in self.events:
                found = (f"{event['poller']}/{event['partition']}", event["subject"])
                if found == (key, subject) and event["version"] == version:
                    return at
        return None

    def arrival(self, made: Change, timeout: float, what: str) -> float:
        """When ``made``'s event was read, waiting for it up to ``timeout`` seconds."""

        def read() -> float | None:
            return self.read_at(made.key, made.subject, made.version)

        return wait_for(read, timeout, what, step=0.02)

    def quiet(self, seconds: float) -> bool:
        with self._lock:
            return bool(self.events) and time.monotonic() - self.events[-1][0] > seconds


@pytest.fixture
def tail(kafka_bootstrap: str, prefix: str, pair: tuple[Instance, Instance]) -> Iterator[Tail]:
    """The tail, once both runners polled every key once: nothing is due for 15 minutes."""
    reading = Tail(kafka_bootstrap, prefix)
    try:

        def settled() -> bool:
            if not reading.quiet(1.5):
                return False
            keys = [k for one in pair for k in one.owned().values()]
            return bool(keys) and all(k["next_due"] is not None for k in keys)

        wait_for(settled, 60, "every key's first poll")
        yield reading
    finally:
        reading.close()


@dataclass(frozen=True)
class Change:
    """A change made at the vendor: the event it must publish and the webhook announcing it."""

    key: str
    subject: str
    version: str
    hook: dict[str, Any]
    made: float  # time.monotonic() just before it was made


def change(sim: Simulator, key: str) -> Change:
    """Change a record under ``key`` (``tracker.<stream>/<tenant>[/<project>[/<issue>]]``)."""
    poller, tenant, *under = key.split("/")
    stream = poller.removeprefix("tracker.")
    made = time.monotonic()
    note = f"changed at {time.time():.3f}"
    if stream == "comments":
        project, issue = under
        record = admin(sim, f"/tenants/{tenant}/comments", {"issue": issue, "body": note}, "POST")
        obj = {"id": record["id"], "issue_id": issue, "project_id": project}
        return Change(key, record["id"], record["etag"], hook("comment.created", tenant, obj), made)
    if stream == "issues":
        (project,) = under
        found = next(i for i in records(sim, tenant, "issues") if i["project"] == project)
        obj = {"id": found["id"], "project_id": project}
        fields = {"title": note}
    else:
        found = records(sim, tenant, stream)[0]
        obj = {"id": found["id"]}
        fields = {"name": note}
    record = admin(sim, f"/tenants/{tenant}/{stream}/{found['id']}", fields, "PATCH")
    noun = stream.removesuffix("s")
    return Change(key, record["id"], record["etag"], hook(f"{noun}.updated", tenant, obj), made)


def hook(kind: str, tenant: str, obj: dict[str, str]) -> dict[str, Any]:
    """A webhook body as the simulator writes it, with the test's marker in it."""
    noun = kind.split(".")[0]
    return {"id": f"evt_{uuid.uuid4().hex[:6]}", "type": kind, "created": int(time.time()),
            "tenant": tenant, noun: obj, "note": MARKER}  # fmt: skip


def published_once(tail: Tail, changes: list[Change]) -> None:
    """Every key's events are in sequence, no version of a record twice, each change once."""
    by_key = tail.by_key()
    for key, events in by_key.items():
        assert in_sequence(e["sequence"] for e in events), (key, [e["sequence"] for e in events])
        versions = [(e["subject"], e["version"]) for e in events]
        assert len(versions) == len(set(versions)), (key, versions)
    for made in changes:
        found = [e for e in by_key.get(made.key, []) if e["subject"] == made.subject]
        assert [e["version"] for e in found].count(made.version) == 1, (made, found)


def test_each_webhook_makes_its_change_readable_within_seconds_exactly_once(
    simulator: Simulator, pair: tuple[Instance, Instance], tail: Tail
) -> None:
    a, b = pair
    first, second, by_hand = (t["id"] for t in simulator.tenants)
    status, _ = http(f"http://127.0.0.1:{a.port}/healthz")
    assert status == 401  # rest.auth is on: the webhook route needs no token all the same

    # The third tenant's change, announced only by webhooks the vendor did not sign.
    unsigned = change(simulator, f"tracker.users/{by_hand}")
    assert a.send(unsigned.hook, by_hand, secret="not-the-secret") == 401
    body = json.dumps(unsigned.hook).encode()
    missing = {"Content-Type": "application/json", "X-Tenant": by_hand}
    assert http(b.hook_url, body, missing)[0] == 401
    assert b.send(unsigned.hook, "t_nobody") == 202  # a tenant the runner does not list

    # The vendor announces its first tenant's changes to one runner, its second's to the other.
    for tenant, to in ((first, a), (second, b)):
        subscription = {"tenant": tenant, "url": to.hook_url, "secret": SECRET}
        admin(simulator, "/webhooks", subscription, "POST")
    changes, took = [], {}
    for tenant in (first, second):
        project = records(simulator, tenant, "projects")[0]["id"]
        issue = next(i for i in records(simulator, tenant, "issues") if i["project"] == project)
        for key in (
            f"tracker.projects/{tenant}",
            f"tracker.issues/{tenant}/{project}",
            f"tracker.comments/{tenant}/{project}/{issue['id']}",
            f"tracker.users/{tenant}",
        ):
            made = change(simulator, key)
            at = tail.arrival(made, BOUND, f"{key}'s change within {BOUND:g}s")
            changes.append(made)
            took[key] = at - made.made
    print("change -> readable on Kafka (s):", {k: round(v, 3) for k, v in took.items()})
    deliveries = admin(simulator, "/webhooks")["deliveries"]
    assert len(deliveries) == len(changes)
    assert [d["status"] for d in deliveries] == [202] * len(changes), deliveries
    for one in (a, b):  # nor any of the vendor's bodies (each names its event)
        assert not [d["event"] for d in deliveries if d["event"] in one.runner.output()]

    # Seconds later, the unsigned webhooks' change is still not on Kafka; signed, it is at once.
    assert tail.read_at(unsigned.key, unsigned.subject, unsigned.version) is None
    sent = time.monotonic()
    assert b.send(unsigned.hook, by_hand) == 202
    at = tail.arrival(unsigned, BOUND, f"the signed webhook's change within {BOUND:g}s")
    print(f"signed webhook -> readable on Kafka: {at - sent:.3f}s")

    time.sleep(1.0)  # anything published twice would be by now
    published_once(tail, [*changes, unsigned])
    assert a.runner.running and b.runner.running
    counted = a.webhooks_counted() + b.webhooks_counted()
    assert counted["bad_signature"] == 2 and counted["unknown_tenant"] == 1, counted
    assert counted["accepted"] == len(changes) + 1, counted


def test_a_webhook_accepted_while_the_keys_owner_is_stopped_is_polled_by_its_next_owner(
    simulator: Simulator, pair: tuple[Instance, Instance], tail: Tail
) -> None:
    tenant = simulator.tenants[2]["id"]
    target = f"tracker.users/{tenant}"
    owner, other = pair if target in pair[0].owned() else pair[::-1]
    assert target in owner.owned(), (owner.owned(), other.owned())
    # Another key of the owner's, changed with no webhook: the takeover alone polls nothing.
    quiet = next(k for k in owner.owned() if k != target and not k.startswith("tracker.comments"))

    owner.runner.pause()  # SIGSTOP: it holds its keys, reads nothing and polls nothing
    announced, unannounced = change(simulator, target), change(simulator, quiet)
    sent = time.monotonic()
    assert other.send(announced.hook, tenant) == 202  # the wake is in Kafka
    answered = time.monotonic() - sent
    owner.runner.kill()  # between the 202 and the poll: only Kafka knows of the wake
    killed = time.monotonic()
    at = tail.arrival(announced, 60, "the change, polled by the key's next owner")
    assert target in other.owned()
    print(
        f"202 in {answered:.3f}s; the change readable {at - killed:.3f}s after the SIGKILL "
        f"(session.timeout 3s)"
    )

    owner.runner.start()  # it takes keys back: the wake is spent, nothing is polled again
    wait_for(lambda: owner.healthy() and bool(owner.owned()), 60, "the restarted runner's keys")
    time.sleep(1.5)  # what it would poll again, it would have by now
    published_once(tail, [announced])
    assert tail.read_at(quiet, unannounced.subject, unannounced.version) is None
    assert owner.runner.running and other.runner.running
