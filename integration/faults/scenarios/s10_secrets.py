"""Secrets: canaries in partition data, in ``${env:...}`` values and in REST credentials never
appear in any topic, runner log line, REST response, CLI output or exception text.

The runners run the declarative invoices poller with tenants from the simulator's
``/tenants``: each tenant's slug (in every request path) and bearer token are partition data,
and every one is a canary. ``${env:...}`` canaries go into a header and a query parameter of
every item request, a header of the tenants request, and the REST credentials (a bearer token
and a basic password). While they poll, tenants break in ways that make error texts: a 5xx
and a 401 whose bodies quote the request (path, query, headers, ``Authorization``), malformed
JSON, timeouts, and a tenant removed between two polls (its 404 names the slug). Meanwhile the
REST API is asked everything it answers, rightly and wrongly (no or wrong credentials, bad
bodies, configs whose ``${env:...}`` values are invalid, a connector posted with ``${env:...}``
values), and ``watukuy-source status`` and ``validate`` are run.

Then every record of every topic of the prefix (internal ones included, read_uncommitted so
aborted ones count) is read raw (keys, values, headers), with every log line of the runners
(``--debug``: tracebacks, and debug logs), and every answer and output collected: no canary,
raw, URL-encoded or lower-cased, may be in any of them. The events pass the verifier too.
Full profile: 12 tenants, the faults twice; short: 6 tenants, once.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

from integration.faults.harness import FaultContext, result
from integration.faults.report import Result
from integration.faults.scenarios.declarative import (
    declarative_pool,
    invoices,
)
from integration.faults.scenarios.s08_vendor_faults import rest_port
from integration.faults.topics import read_raw, topics_of
from integration.faults.vendor import Mutator, Simulator
from integration.runners import ROOT, RunnerProcess
from watukuy.rest.port import PARTITION_OPERATIONS

NAME = "secrets"
REST_USER = "operator"
HEAL_AFTER_S = 6.0
ROLES = ("healthy", "5xx-echo", "401-echo", "malformed", "timeout", "removed")
FAULTS: dict[str, dict[str, Any]] = {
    "5xx-echo": {"error_rate": 1.0, "fail_status": 502, "echo_request": True},
    "401-echo": {"error_rate": 1.0, "fail_status": 401, "echo_request": True},
    "malformed": {"malformed_json": True},
    "timeout": {"delay": 3.0},
}


def _canary(label: str) -> str:
    return f"cnry{label}{secrets.token_hex(8)}"


@dataclass
class Canaries:
    """Every secret of the run by a name that says where it was put."""

    values: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, value: str) -> str:
        self.values[name] = value
        return value

    def forms(self) -> dict[bytes, str]:
        """Each canary as it could be written: raw, URL-encoded, lower-cased; by the name."""
        out: dict[bytes, str] = {}
        for name, value in self.values.items():
            for form in {value, quote(value, safe=""), quote_plus(value), value.lower()}:
                out[form.encode()] = name
        return out

    def found(self, blob: bytes) -> list[str]:
        return sorted({name for form, name in self.forms().items() if form in blob})


@dataclass
class Exposure:
    """Everything the run produced that a secret could leak into, by where it came from."""

    texts: list[tuple[str, bytes]] = field(default_factory=list)

    def add(self, where: str, blob: bytes | str | None) -> None:
        if blob:
            self.texts.append((where, blob.encode() if isinstance(blob, str) else blob))

    def leaks(self, canaries: Canaries) -> list[str]:
        problems = []
        for where, blob in self.texts:
            names = canaries.found(blob)
            if names:
                problems.append(f"{where}: holds {', '.join(names)}")
        return problems


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    rounds = 2 if full else 1
    canaries = Canaries()
    env = {
        "WATUKUY_CANARY_HEADER": canaries.add("env header", _canary("hdr")),
        "WATUKUY_CANARY_QUERY": canaries.add("env query", _canary("qry")),
        "WATUKUY_CANARY_TENANTS": canaries.add("env tenants header", _canary("tnt")),
        "WATUKUY_REST_TOKEN": canaries.add("REST token", _canary("rest")),
        "WATUKUY_REST_PW": canaries.add("REST password", _canary("pw")),
    }
    basic = base64.b64encode(f"{REST_USER}:{env['WATUKUY_REST_PW']}".encode()).decode()
    canaries.add("REST basic credentials", basic)

    sim = ctx.simulator(0, 0)
    role_of: dict[str, str] = {}
    for index in range(len(ROLES) * (2 if full else 1)):
        slug = canaries.add(f"slug {index}", _canary("slug"))
        tenant = sim.call("POST", "/_admin/tenants", {"slug": slug, "items": 30})
        canaries.add(f"token of {tenant['id']}", tenant["token"])
        role_of[tenant["id"]] = ROLES[index % len(ROLES)]

    request = invoices()["request"] | {
        "timeout": "2s",
        "query": {"limit": 100, "api_key": "${env:WATUKUY_CANARY_QUERY}"},
        "headers": {"X-Client-Secret": "${env:WATUKUY_CANARY_HEADER}"},
    }
    partitions = invoices()["partitions"]
    partitions["http"]["headers"] = {"X-Admin-Key": "${env:WATUKUY_CANARY_TENANTS}"}
    poller = invoices(
        request=request,
        partitions=partitions,
        circuit={"failure_threshold": 2, "cooldown": "1s", "max_cooldown": "2s"},
    )
    sections = {
        "rest": {
            "auth": {
                "tokens": ["${env:WATUKUY_REST_TOKEN}"],
                "basic": {REST_USER: "${env:WATUKUY_REST_PW}"},
            }
        },
        "log": {"level": "debug", "format": "json"},
    }
    exposure = Exposure()
    problems: list[str] = []
    with declarative_pool(ctx, "secrets", sim, poller=poller, sections=sections, env=env) as pool:
        runners = [pool.add(f"r{i}") for i in range(1, (2 if full else 1) + 1)]
        for runner in runners:
            runner.command.append("--debug")  # tracebacks and debug logs: more to leak into
            runner.start()
        for runner in runners:
            runner.wait_started()
        pool.wait_sharing(len(runners))
        watch = ctx.watch(pool)
        ctx.caught_up(pool, watch)
        rest = Rest(runners[0], env["WATUKUY_REST_TOKEN"], basic, exposure)
        with Mutator(sim, every=0.05, tenants=list(role_of)):
            for round_ in range(rounds):
                healed = time.monotonic() + HEAL_AFTER_S
                break_tenants(sim, role_of, heal_after=HEAL_AFTER_S, remove=round_ == 0)
                time.sleep(2.5)  # the errors are made and recorded
                rest.probe_everything(list(role_of), problems)
                run_cli(runners[0], exposure)
                time.sleep(max(0.0, healed - time.monotonic()))
        ctx.caught_up(pool, watch)
        rest.delete_posted(problems)
        codes = pool.stop_all()
        problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
        for runner in runners:
            exposure.add(f"log of {runner.name}", runner.output())
        for record in read_raw(
            pool.bootstrap, topics_of(pool.bootstrap, pool.prefix), committed=False
        ):
            where = f"topic {record.topic}[{record.partition}]@{record.offset}"
            exposure.add(f"{where} key", record.key)
            exposure.add(f"{where} value", record.value)
            for name, value in record.headers:
                exposure.add(f"{where} header {name}", value)
        problems += exposure.leaks(canaries)
        problems += proof_of_exposure(sim, role_of, env, exposure)
        print(
            f"{NAME}: {len(canaries.values)} canaries, {len(exposure.texts)} texts searched "
            f"({sum(len(b) for _, b in exposure.texts)} bytes), {rest.calls} REST calls",
            file=sys.stderr,
        )
        verdict = ctx.verify(pool)
    return result(NAME, verdict, rounds=rounds, recovery_s=None, problems=problems)


def proof_of_exposure(
    sim: Simulator, role_of: Mapping[str, str], env: Mapping[str, str], exposure: Exposure
) -> list[str]:
    """That the canaries went where they could leak from: the vendor got the ``${env:...}``
    query value, the errors were made and logged, and the texts are many."""
    problems = []
    echo = next(t for t, role in role_of.items() if role == "5xx-echo")
    log = sim.call("GET", f"/_admin/tenants/{echo}/log")
    if not any(e["query"].get("api_key") == env["WATUKUY_CANARY_QUERY"] for e in log):
        problems.append("the vendor never got the ${env:...} query canary: nothing was tested")
    if not any(e["status"] == 502 for e in log):
        problems.append(f"{echo} never answered its echoing 502")
    logs = b"".join(blob for where, blob in exposure.texts if where.startswith("log of "))
    for needed in (b"circuit opened", echo.encode(), b"malformed JSON", b"timed out"):
        if needed not in logs:
            problems.append(f"the runners' logs never say {needed.decode()!r}: too little seen")
    if len(exposure.texts) < 100:
        problems.append(f"only {len(exposure.texts)} texts read: the scenario saw too little")
    return problems


def break_tenants(
    sim: Simulator, role_of: Mapping[str, str], *, heal_after: float, remove: bool
) -> None:
    for tenant, role in role_of.items():
        if role in FAULTS:
            sim.set_faults(tenant, heal_after=heal_after, **FAULTS[role])
        elif role == "removed" and remove:
            sim.remove_tenant(tenant)  # polled again before the next refresh: a 404


# -- REST -----------------------------------------------------------------------------------


class Rest:
    """Calls one runner's REST API and files every answer, status and body, as exposure."""

    def __init__(self, runner: RunnerProcess, token: str, basic: str, exposure: Exposure):
        port = rest_port(runner)
        if port is None:
            raise RuntimeError(f"{runner.name} did not log its REST port")
        self.base = f"http://127.0.0.1:{port}"
        self.auth = {"Authorization": f"Bearer {token}"}
        self.basic = {"Authorization": f"Basic {basic}"}
        self.exposure = exposure
        self.calls = 0
        self.posted: list[str] = []

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, bytes]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json"} | dict(
            self.auth if headers is None else headers
        )
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=sent)
        self.calls += 1
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, answer = response.status, response.read()
                answer_headers = str(response.headers)
        except urllib.error.HTTPError as exc:
            status, answer, answer_headers = exc.code, exc.read(), str(exc.headers)
        self.exposure.add(f"REST {method} {path} -> {status}", answer)
        if (method, path, status) == ("POST", "/connectors", 201) and isinstance(body, dict):
            self.posted.append(str(body["name"]))  # accepted after all: deleted at the end
        self.exposure.add(f"REST {method} {path} -> {status} headers", answer_headers)
        return status, answer

    def probe_everything(self, tenants: list[str], problems: list[str]) -> None:
        """Every route, rightly and wrongly; a 5xx is a problem of its own."""
        statuses: list[tuple[str, int]] = []

        def call(method: str, path: str, body: Any = None, **options: Any) -> bytes:
            status, answer = self.call(method, path, body, **options)
            statuses.append((f"{method} {path}", status))
            return answer

        for path in (
            "/",
            "/connectors",
            "/connectors?expand=status",
            "/connectors?expand=info",
            "/connectors/invoices",
            "/connectors/invoices/config",
            "/connectors/invoices/status",
            "/connectors/invoices/offsets",
            "/connectors/invoices/partitions",
            "/connectors/invoices/parked",
            "/connector-plugins",
            "/health",
            "/healthz",
            "/metrics",
            "/openapi.json",
        ):
            call("GET", path)
        call("GET", "/connectors/invoices/status", headers=self.basic)
        # Credentials missing, wrong, or of another kind.
        call("GET", "/connectors", headers={})
        call("GET", "/connectors", headers={"Authorization": "Bearer not-the-token"})
        call("GET", "/connectors", headers={"Authorization": "Basic b3BlcmF0b3I6bm9wZQ=="})
        for tenant in tenants:
            call("POST", f"/connectors/invoices/partitions/{tenant}/trigger")
        for verb in sorted(PARTITION_OPERATIONS):
            call("POST", f"/connectors/invoices/partitions/t_9999/{verb}", {})
        # Bodies that are wrong in every way, some quoting ${env:...} values.
        call("POST", "/connectors", raw=b'{"name": "x", "config": ${env:WATUKUY_CANARY_HEADER}')
        call("POST", "/connectors", raw=b"a" * (1024 * 1024 + 10))
        call(
            "POST", "/connectors", {"name": "x"}, headers=self.auth | {"Content-Type": "text/plain"}
        )
        bad_url = invoices(request={"url": "${env:WATUKUY_CANARY_HEADER}/items"})
        bad_schedule = invoices(schedule={"min": "${env:WATUKUY_CANARY_QUERY}"})
        bad_header = invoices(
            request=invoices()["request"] | {"headers": {"${env:WATUKUY_CANARY_HEADER}": "x"}}
        )
        for index, config in enumerate((bad_url, bad_schedule, bad_header)):
            config.pop("name")
            config.pop("schema")
            call("POST", "/connectors", {"name": f"bad{index}", "config": config})
            call("PUT", f"/connector-plugins/{self.plugin()}/config/validate", config)
        call(
            "PUT",
            "/connectors/invoices/config",
            {"request": {"url": "${env:WATUKUY_CANARY_HEADER}"}},
        )
        call("PATCH", "/connectors/invoices/offsets", {"offsets": []})
        call("GET", "/connectors/invoices/partitions/t_9999/nothing")
        # A connector posted with ${env:...} values: shown back as written, never resolved.
        if not any(name == "orders" for name in self.posted):
            orders = invoices(schedule={"min": "1s", "max": "2s"})
            orders["request"] = orders["request"] | {
                "headers": {"X-Client-Secret": "${env:WATUKUY_CANARY_HEADER}"}
            }
            orders.pop("name")
            orders.pop("schema")
            call("POST", "/connectors", {"name": "orders", "config": orders})
        shown = call("GET", "/connectors/orders/config")
        if b"${env:WATUKUY_CANARY_HEADER}" not in shown:
            problems.append("GET /connectors/orders/config does not show ${env:...} as written")
        call("GET", "/connectors/orders/status")
        problems += [f"REST {what} answered {status}" for what, status in statuses if status >= 500]

    def plugin(self) -> str:
        status, answer = self.call("GET", "/connector-plugins")
        plugins = json.loads(answer) if status == 200 else []
        return str(plugins[0]["class"]) if plugins else "declarative"

    def delete_posted(self, problems: list[str]) -> None:
        for name in self.posted:
            status, _ = self.call("DELETE", f"/connectors/{name}")
            if status >= 300:
                problems.append(f"REST DELETE /connectors/{name} answered {status}")


# -- the CLI --------------------------------------------------------------------------------


def run_cli(runner: RunnerProcess, exposure: Exposure) -> None:
    """``status`` and ``validate`` against a runner's config, in the runners' environment."""
    config = runner.command[runner.command.index("--config") + 1]
    for args in (["status"], ["validate"]):
        done = subprocess.run(
            [sys.executable, "-m", "watukuy.cli", *args, "--config", config, "--debug"],
            cwd=ROOT,
            env=runner.env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        exposure.add(f"watukuy-source {' '.join(args)} (exit {done.returncode})", done.stdout)
        exposure.add(f"watukuy-source {' '.join(args)} stderr", done.stderr)
