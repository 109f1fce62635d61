"""REST under fire: conflicting PUTs, operations on a partition whose owner is being killed, and
a fuzz pass over every route. No answer may be a 5xx, and no accepted write may be lost or
doubled.

1. **Conflicting PUTs.** Waves of PUTs of one REST connector's config, all at once, half to
   each of two runners, each with a config of its own. Each is answered 200 (it was written)
   or 409 (it lost the race, in Connect's error shape). Afterwards every runner's
   ``GET .../config`` shows the same config, one a PUT was told it wrote; the configs topic holds
   each accepted config exactly once and no refused one.
2. **Operations while the owner dies.** The config-file poller polls rarely (every 10 minutes
   at most), so the vendor sees a tenant only when asked. Its owner is SIGKILLed, then a
   trigger (or a reset) is sent to the surviving runner: answered 202, it must cause exactly
   one request to the vendor once the survivor took the key over (the command waits in the
   state topic for the new owner). Pause and resume then follow: the key shows PAUSED, then
   RUNNING again, in the status any runner serves.
3. **Fuzz.** Hypothesis draws requests for every route of ``watukuy.rest.routes.ROUTES``: odd
   path segments, unknown query parameters, bodies of any JSON shape, unknown fields, wrong
   types, bytes that are not JSON, other content types; and each write route gets a body over
   the 1 MiB limit. Every answer is below 500 and every error is Connect's
   ``{"error_code", "message"}``. Writes never address the poller the verifier checks.

Finally the poller's events pass the verifier (a reset without ``clear_snapshot`` re-reads
the vendor but publishes nothing new).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from integration.faults.harness import POLLER_NAME, FaultContext, result
from integration.faults.report import Result
from integration.faults.scenarios.declarative import (
    DeclarativePool,
    declarative_pool,
    invoices,
)
from integration.faults.scenarios.rest_api import (
    Answer,
    call,
    connector_config,
    rest_port,
    tenants_source,
)
from integration.faults.topics import read_raw
from integration.faults.vendor import Simulator
from integration.runners import RunnerProcess, wait_for
from watukuy.options.declarative import DECLARATIVE_KEYS
from watukuy.rest.openapi import openapi_document
from watukuy.rest.routes import ROUTES
from watukuy.store.kafka.partitioner import partition_for

NAME = "rest-fire"
FIRE = "fire"
"""The REST connector PUT at from both runners."""
FUZZED = "fuzzed"
"""A REST connector the fuzz may break in any way."""
WAIT = 60.0
HOLD = 1.5
"""How long a count of vendor requests must stay put to say an operation took effect once."""
HUGE = 2 * 1024 * 1024
SLOW = {"min": "10m", "max": "1h"}
"""A schedule that polls only when asked, so that each poll can be counted."""


@dataclass
class Fire:
    pool: DeclarativePool
    sim: Simulator
    sim_b: Simulator
    live: list[RunnerProcess]
    problems: list[str] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)
    requests: int = 0

    def ports(self) -> list[int]:
        return [rest_port(runner) for runner in self.live]

    def call(self, port: int, method: str, path: str, body: Any = None, **options: Any) -> Answer:
        """A call whose 5xx, or error not in Connect's shape, is a problem."""
        self.requests += 1
        answer = call(port, method, path, body, **options)
        if answer.status >= 500:
            self.problems.append(f"{method} {path} answered {answer.status}: {answer.body}")
        elif answer.status >= 400 and not answer.error_shaped:
            self.problems.append(f"{method} {path}: {answer.status} not in Connect's error shape")
        return answer

    # -- 1. conflicting PUTs ----------------------------------------------------------------------

    def conflicting_puts(self, waves: int, per_wave: int) -> None:
        """Waves of PUTs all at once; with each wave, one trigger of each of the connector's
        first two tenants and a pause of the others, which land while the runners redefine
        the connector: each trigger answered 202 polls once (twice if the redefinition dropped its
        poll; see ``_polled_once``), each pause answered 202 leaves its key PAUSED."""
        tenants = self.sim_b.tenants()
        triggered, paused = tenants[:2], tenants[2:]
        # Listed from the vendor: redefining it awaits that listing, a window for operations.
        source = tenants_source(self.sim_b)
        first = connector_config(self.sim_b, tenants, schedule=SLOW, partitions=source)
        created = self.call(self.ports()[0], "POST", "/connectors", {"name": FIRE, "config": first})
        if created.status != 201:
            raise AssertionError(f"POST /connectors: {created.status} {created.body}")
        self.accepted.append(first)
        self.pause_at_once(paused)
        # Only the triggered tenants must have polled: a pause that lands before a tenant's
        # first poll rightly keeps it from polling at all (CI met that race).
        wait_for(
            lambda: (
                all(self.polls(t, self.sim_b) for t in triggered)
                and all(call(p, "GET", f"/connectors/{FIRE}").status == 200 for p in self.ports())
            ),
            WAIT,
            "every runner to know the connector, and its first polls",
        )
        time.sleep(HOLD)  # the first polls' pages are done
        for wave in range(waves):
            configs = [
                connector_config(
                    self.sim_b,
                    tenants,
                    schedule=SLOW,
                    partitions=source,
                    request={**first["request"], "headers": {"X-Put": f"{wave}.{i}"}},
                )
                for i in range(per_wave)
            ]
            before = {t: self.polls(t, self.sim_b) for t in triggered}
            operations = [("trigger", t) for t in triggered] + [("pause", t) for t in paused]
            answers, operated = self._all_at_once(configs, operations)
            won = [c for c, a in zip(configs, answers, strict=True) if a.status == 200]
            self.accepted += won
            self.refused += [c for c, a in zip(configs, answers, strict=True) if a.status == 409]
            odd = sorted({a.status for a in answers} - {200, 409})
            if odd:
                self.problems.append(f"wave {wave}: PUTs answered {odd} (200 or 409 expected)")
            if not won:
                self.problems.append(f"wave {wave}: none of {per_wave} PUTs was accepted")
            agreed = wait_for(self._agreed, WAIT, "every runner to show the same config")
            if agreed not in won:
                self.problems.append(f"wave {wave}: the config every runner shows was not a winner")
            for (verb, tenant), answer in zip(operations, operated, strict=True):
                if answer.status != 202:
                    self.problems.append(
                        f"{verb} of {FIRE}/{tenant} during PUTs: {answer.status} {answer.body}"
                    )
            self._polled_once(
                {
                    t: before[t]
                    for (verb, t), a in zip(operations, operated, strict=True)
                    if verb == "trigger" and a.status == 202
                }
            )
        for tenant in paused:
            try:
                self.wait_state(tenant, "PAUSED", FIRE)
            except TimeoutError:
                shown = self.state_of(tenant, FIRE)
                self.problems.append(f"pause of {FIRE}/{tenant} answered 202; it is {shown}: lost")
        self._check_written()

    def pause_at_once(self, tenants: list[str]) -> None:
        """Pause keys of the connector just created, through the runner that created it, at
        once: that runner's engine and the keys' owners may not have the connector yet. Each
        pause is accepted and each key ends up PAUSED."""
        port = self.ports()[0]
        for tenant in tenants:
            answer = self.call(port, "POST", f"/connectors/{FIRE}/partitions/{tenant}/pause")
            if answer.status != 202:
                self.problems.append(f"pause of new {FIRE}/{tenant}: {answer.status} {answer.body}")
        for tenant in tenants:
            try:
                self.wait_state(tenant, "PAUSED", FIRE)
            except TimeoutError:
                shown = self.state_of(tenant, FIRE)
                self.problems.append(f"pause of new {FIRE}/{tenant} answered 202, {shown}: lost")

    def _polled_once(self, before: dict[str, int]) -> None:
        """Each of these fire tenants, triggered once while the connector was redefined,
        polls once more, or twice: a redefinition that lets the key go while its triggered
        poll is in flight drops that poll's commit, so the key, held again with the trigger's
        state (due now), polls again. That is exactly-once at work (the vendor sees a second
        request, Kafka one outcome); a third request would be a doubled trigger."""
        for tenant, count in before.items():
            if not self._polls_after(tenant, count, self.sim_b):
                self.problems.append(f"trigger of {FIRE}/{tenant} answered 202, never polled: lost")
        time.sleep(HOLD)
        for tenant, count in before.items():
            polled = self.polls(tenant, self.sim_b) - count
            if polled > 2:
                self.problems.append(f"trigger of {FIRE}/{tenant} answered 202, polled {polled}x")

    def _all_at_once(
        self, configs: list[dict[str, Any]], operations: list[tuple[str, str]]
    ) -> tuple[list[Answer], list[Answer]]:
        """The PUTs and the operations, released together, alternating between runners."""
        ports = self.ports()
        calls: list[tuple[str, str, Any]] = [
            ("PUT", f"/connectors/{FIRE}/config", config) for config in configs
        ]
        calls += [
            ("POST", f"/connectors/{FIRE}/partitions/{tenant}/{verb}", None)
            for verb, tenant in operations
        ]
        start = threading.Barrier(len(calls))

        def send(index: int) -> Answer:
            method, path, body = calls[index]
            start.wait()
            if index >= len(configs):  # spread over the time the runners apply the winners
                time.sleep(0.15 * (index - len(configs)))
            return self.call(ports[index % len(ports)], method, path, body)

        with ThreadPoolExecutor(len(calls)) as threads:
            answers = list(threads.map(send, range(len(calls))))
        return answers[: len(configs)], answers[len(configs) :]

    def _agreed(self) -> dict[str, Any] | None:
        nested = f"/connectors/{FIRE}/config?format=nested"  # as the PUTs wrote it
        shown = [call(port, "GET", nested) for port in self.ports()]
        bodies = [a.body for a in shown if a.status == 200]
        if len(bodies) == len(shown) and all(b == bodies[0] for b in bodies):
            config: dict[str, Any] = bodies[0]
            return config
        return None

    def _check_written(self) -> None:
        """Each accepted PUT is in the configs topic once, no refused one is."""
        written = Counter[str]()
        for record in read_raw(self.pool.bootstrap, [f"{self.pool.prefix}.configs"]):
            if record.key == f"connector/{FIRE}".encode() and record.value is not None:
                written[_canonical(json.loads(record.value)["config"])] += 1
        for config in self.accepted:
            count = written[_canonical(config)]
            if count != 1:
                self.problems.append(f"an accepted config is in the configs topic {count} times")
        leaked = sum(1 for config in self.refused if written[_canonical(config)])
        if leaked:
            self.problems.append(f"{leaked} config(s) refused with 409 were written anyway")

    # -- 2. operations while the owner dies ------------------------------------------------------

    def polls(self, tenant: str, sim: Simulator | None = None) -> int:
        """Vendor requests ``tenant`` got so far (at the verified poller's simulator)."""
        stats = (sim or self.sim).call("GET", "/_admin/stats")
        count: int = stats["tenants"].get(tenant, 0)
        return count

    def _polls_after(self, tenant: str, count: int, sim: Simulator) -> bool:
        """Whether ``tenant`` gets more than ``count`` vendor requests within :data:`WAIT`."""
        try:
            wait_for(lambda: self.polls(tenant, sim) > count, WAIT, f"a poll of {tenant}")
        except TimeoutError:
            return False
        return True

    def holder(self, tenant: str) -> RunnerProcess | None:
        """The live runner holding the tenant's key now (by the group's assignment)."""
        partition = partition_for(f"{POLLER_NAME}/{tenant}", self.pool.partitions)
        held = self.pool.held()
        for runner in self.live:
            if partition in held.get(runner.runner_id, set()):
                return runner
        return None

    def owner_of(self, tenant: str) -> RunnerProcess:
        return wait_for(lambda: self.holder(tenant), WAIT, f"a runner to hold {tenant}")

    def wait_holder(self, tenant: str, runner: RunnerProcess) -> None:
        wait_for(lambda: self.holder(tenant) is runner, WAIT, f"{runner.name} to hold {tenant}")

    def operations_under_kills(self, kills: int, *, restart: bool) -> None:
        """Each round SIGKILLs the owner of a tenant. Even rounds send a counted operation
        (trigger, reset) into the window where nobody holds the key; odd rounds send pauses and
        reads over and over through the takeover, then the counted one to the new owner. With
        ``restart`` the killed runner comes back while pauses and reads go on, so the key moves
        again under them."""
        tenants = self.sim.tenants()
        for round_ in range(kills):
            tenant = tenants[round_ % len(tenants)]
            owner = self.owner_of(tenant)
            survivor = next(r for r in self.live if r is not owner)
            port = rest_port(survivor)
            verb, body = ("trigger", None) if round_ % 4 < 2 else ("reset", {"to": None})
            before = self.polls(tenant)
            killed_at = time.monotonic()
            if round_ % 2 == 0:
                owner.kill()
                self.live.remove(owner)
                self.once(port, tenant, verb, body, before, killed_at)
                self.pause_resume(port, tenant)
            else:
                with self.hammer(port, tenant):
                    owner.kill()
                    self.live.remove(owner)
                    self.wait_holder(tenant, survivor)
                    time.sleep(1.0)
                self.once(port, tenant, verb, body, None)
            if not restart:  # a single round: the other counted operation, on the new owner
                other, body = ("reset", {"to": None}) if verb == "trigger" else ("trigger", None)
                self.once(port, tenant, other, body, None)
                continue
            with self.hammer(port, tenant):
                owner.start().wait_started()
                self.live.append(owner)
                self.pool.wait_sharing(len(self.live))
                time.sleep(1.0)

    @contextmanager
    def hammer(self, port: int, tenant: str) -> Iterator[None]:
        """Pause ``tenant`` and read the connector's status, partitions and offsets, again and
        again while the block runs: each must succeed. Afterwards the key shows PAUSED (no pause
        was lost), then it is resumed."""
        base = f"/connectors/{POLLER_NAME}"
        calls = [
            ("POST", f"{base}/partitions/{tenant}/pause"),
            ("GET", f"{base}/status"),
            ("GET", f"{base}/partitions"),
            ("GET", f"{base}/offsets"),
        ]
        stop = threading.Event()

        def loop() -> None:
            for index in itertools.count():
                if stop.wait(0.05):
                    return
                method, path = calls[index % len(calls)]
                try:
                    answer = self.call(port, method, path)
                except OSError as exc:
                    self.problems.append(f"{method} {path} during a takeover: no answer ({exc})")
                    continue
                if 300 <= answer.status < 500:
                    message = answer.body.get("message") if answer.error_shaped else answer.body
                    self.problems.append(
                        f"{method} {path} during a takeover answered {answer.status}: {message}"
                    )

        thread = threading.Thread(target=loop, name="hammer", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(WAIT)
        try:
            self.wait_state(tenant, "PAUSED")
        except TimeoutError:
            self.problems.append(f"{tenant} paused again and again, but not PAUSED: lost")
        self.pause_resume(port, tenant, verbs=(("resume", "RUNNING"),))

    def once(
        self,
        port: int,
        tenant: str,
        verb: str,
        body: Any,
        before: int | None,
        since: float | None = None,
    ) -> None:
        """Send ``verb`` on ``tenant``: a 202 must bring exactly one more vendor request."""
        before = self.polls(tenant) if before is None else before
        path = f"/connectors/{POLLER_NAME}/partitions/{tenant}/{verb}"
        answer = self.call(port, "POST", path, body)
        if answer.status != 202:
            self.problems.append(f"{verb} of {tenant}: {answer.status} {answer.body}")
            return
        try:
            wait_for(lambda: self.polls(tenant) > before, WAIT, f"the {verb} of {tenant} to poll")
        except TimeoutError:
            self.problems.append(f"{verb} of {tenant} answered 202 but never polled: lost")
            return
        if since is not None:
            self.recoveries.append(time.monotonic() - since)
        time.sleep(HOLD)
        polled = self.polls(tenant) - before
        if polled != 1:
            self.problems.append(f"{verb} of {tenant} answered 202 and polled {polled} times")

    def pause_resume(
        self,
        port: int,
        tenant: str,
        verbs: tuple[tuple[str, str], ...] = (("pause", "PAUSED"), ("resume", "RUNNING")),
    ) -> None:
        for verb, state in verbs:
            path = f"/connectors/{POLLER_NAME}/partitions/{tenant}/{verb}"
            answer = self.call(port, "POST", path)
            if answer.status != 202:
                self.problems.append(f"{verb} of {tenant}: {answer.status} {answer.body}")
                continue
            try:
                self.wait_state(tenant, state)
            except TimeoutError:
                shown = self.state_of(tenant)
                self.problems.append(f"{verb} of {tenant} answered 202; it stays {shown}: lost")

    def wait_state(self, tenant: str, state: str, connector: str = POLLER_NAME) -> None:
        wait_for(lambda: self.state_of(tenant, connector) == state, WAIT, f"{tenant} to be {state}")

    def state_of(self, tenant: str, connector: str = POLLER_NAME) -> str | None:
        answer = call(self.ports()[0], "GET", f"/connectors/{connector}/status")
        if answer.status != 200:
            return None
        for task in answer.body["tasks"]:
            if task["partition"] == tenant:
                state: str = task["state"]
                return state
        return None

    # -- 3. fuzz ---------------------------------------------------------------------------------

    def fuzz(self, examples: int) -> None:
        ports = self.ports()
        config = connector_config(self.sim_b, self.sim_b.tenants(), schedule=SLOW)
        created = self.call(ports[0], "POST", "/connectors", {"name": FUZZED, "config": config})
        if created.status != 201:
            raise AssertionError(f"POST /connectors: {created.status} {created.body}")
        for method, template, _ in ROUTES:  # one body over the limit for each write route
            if method in {"POST", "PUT", "PATCH"}:
                path = _fill(template, FUZZED, "t_0001", "http")
                raw = json.dumps({"pad": "x" * HUGE}).encode()
                answer = self.call(ports[0], method, path, raw=raw)
                if answer.status != 413 and _reads_body(method, template):
                    self.problems.append(f"{method} {path} with 2 MiB: {answer.status}, not 413")
        drawn = st.one_of(_requests(self.sim.tenants()), _config_changes(config))

        @settings(
            max_examples=examples,
            database=None,
            deadline=None,
            phases=[Phase.generate],  # nothing raises: problems are collected, not shrunk
            suppress_health_check=list(HealthCheck),
        )
        @given(drawn)
        def send(request: Request) -> None:
            port = ports[self.requests % len(ports)]
            try:
                self.call(
                    port,
                    request.method,
                    request.path,
                    raw=request.raw,
                    content_type=request.content_type,
                    timeout=30,
                )
            except OSError as exc:
                self.problems.append(f"{request.method} {request.path}: no answer ({exc})")

        send()


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    raw: bytes | None
    content_type: str | None


_ODD_SEGMENTS = ["", ".", "..", "~", "-", "a" * 300, "%", "%00", "\u00e9t\u00e9", "a/b", " "]
_FIELDS = [
    "name",
    "config",
    "initial_state",
    "to",
    "from",
    "clear_snapshot",
    "ids",
    "partition",
    "offsets",
    "offset",
    "request",
    "partitions",
    "schedule",
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def _requests(tenants: list[str]) -> st.SearchStrategy[Request]:
    """Any route, with odd names, keys, queries, bodies and content types. Writes go to the
    fuzzed connector or to names that do not exist, never to the verified poller."""
    names = st.sampled_from([FUZZED, FIRE, "nope", *_ODD_SEGMENTS]) | st.text(max_size=30)
    keys = st.sampled_from([*tenants, "t_9999", *_ODD_SEGMENTS]) | st.text(max_size=30)
    plugins = st.sampled_from(["http", "python", "java", *_ODD_SEGMENTS]) | st.text(max_size=12)
    queries = st.dictionaries(
        st.sampled_from(["expand", "includeTasks", "onlyFailed", "partition", "kind", "x"])
        | st.text(max_size=8),
        st.sampled_from(["status", "info", "true", "false", "poison", "~", ""])
        | st.text(max_size=8),
        max_size=3,
    )
    bodies = st.one_of(
        st.none(),
        _JSON.map(lambda value: json.dumps(value).encode()),
        st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=4).map(
            lambda value: json.dumps(value).encode()
        ),
        st.binary(max_size=64),
        st.sampled_from([b"{", b"[1,", b'{"to": NaN}', b"\xff\xfe", b"null", b'"x"', b"1e999"]),
    )
    content_types = st.sampled_from(
        ["application/json", "text/plain", None, "application/merge-patch+json", "a/b+json"]
    )

    @st.composite
    def build(draw: Callable[..., Any]) -> Request:
        method, template, _ = draw(st.sampled_from(ROUTES))
        name = draw(names)
        if method != "GET" and name == POLLER_NAME:
            name = FUZZED
        path = _fill(template, name, draw(keys), draw(plugins))
        query = draw(queries)
        if query:
            path += "?" + urllib.parse.urlencode(query)
        return Request(method, path, draw(bodies), draw(content_types))

    strategy: st.SearchStrategy[Request] = build()
    return strategy


_VALUES = st.one_of(
    _JSON,
    st.floats(),  # inf and nan, sent as 1e999 and as the NaN JSON does not have
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from(["", "0s", "-1s", "1e9d", "{partition.nope}", "${env:NOPE}", "{cursor}"]),
)
_CONFIG_PATHS = [doc.path for doc in DECLARATIVE_KEYS if doc.path != "name"]


def _config_changes(base: dict[str, Any]) -> st.SearchStrategy[Request]:
    """A valid config with one key (any documented one, at any depth) set to any value, PUT,
    PATCHed or validated on the fuzzed connector: what the config checks must all refuse
    with a 400 naming the field, or accept."""

    @st.composite
    def build(draw: Callable[..., Any]) -> Request:
        config = copy.deepcopy(base)
        path = draw(st.sampled_from(_CONFIG_PATHS)).split(".")
        where = config
        for name in path[:-1]:
            if not isinstance(where.get(name), dict):
                where[name] = {}
            where = where[name]
        where[path[-1]] = draw(_VALUES)
        text = json.dumps(config).replace("-Infinity", "-1e999").replace("Infinity", "1e999")
        method, route = draw(
            st.sampled_from(
                [
                    ("PUT", f"/connectors/{FUZZED}/config"),
                    ("PATCH", f"/connectors/{FUZZED}/config"),
                    ("PUT", "/connector-plugins/http/config/validate"),
                ]
            )
        )
        return Request(method, route, text.encode(), "application/json")

    strategy: st.SearchStrategy[Request] = build()
    return strategy


def _fill(template: str, name: str, key: str, plugin: str) -> str:
    quote = urllib.parse.quote
    return (
        template.replace("{name}", quote(name, safe=""))
        .replace("{key}", quote(key, safe=""))
        .replace("{plugin}", quote(plugin, safe=""))
        .replace("{id}", "0")
        .replace("{logger}", "root")
    )


def _reads_body(method: str, template: str) -> bool:
    """The routes the OpenAPI document gives a body (the target changes, restarts and resets
    take none), so a route added with a body is checked without a list here to keep."""
    operation = openapi_document()["paths"].get(template, {}).get(method.lower(), {})
    return "requestBody" in operation


def _canonical(config: Any) -> str:
    return json.dumps(config, sort_keys=True)


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    waves, per_wave, kills, examples = (4, 24, 4, 1500) if full else (1, 12, 1, 120)
    sim = ctx.simulator(3, 10)
    sim_b = ctx.simulator(4, 5, seed=11)
    # Polled when asked, so each operation's vendor requests can be counted.
    poller = invoices(schedule=SLOW)
    with declarative_pool(ctx, "rest-fire", sim, poller=poller) as pool:
        runners = pool.start(2)
        watch = ctx.watch(pool)
        ctx.caught_up(pool, watch)
        fire = Fire(pool, sim, sim_b, list(runners))
        fire.conflicting_puts(waves, per_wave)
        fire.operations_under_kills(kills, restart=full)
        fire.fuzz(examples)
        ctx.caught_up(pool, watch)
        codes = pool.stop_all()
        fire.problems += [
            f"{n} exited with {c} at the end"
            for n, c in codes.items()
            if c not in (0, None) and pool.runners[n] in fire.live
        ]
        verdict = ctx.verify(pool)
    return result(
        NAME,
        verdict,
        rounds=kills,
        recovery_s=max(fire.recoveries) if fire.recoveries else None,
        problems=list(dict.fromkeys(fire.problems)),  # a takeover repeats its problems
    )
