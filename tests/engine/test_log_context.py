"""The log lines an operator reads, as the runner writes them (``log.format`` json and text),
while canary tenants fail in every way a poll can: no line holds partition data or a
``${env:...}`` secret, and every line of a key's poll says which poller, partition and lane
it is about.

Two pollers run side by side: the Python canary poller of :mod:`tests.engine.canaries`
(5xx, timeout, malformed JSON, 404, 401, refused, a failing handler, a failing
``partitions()``), and a declarative one loaded from a runner config whose tenant data and
headers come from ``${env:...}`` (an unknown slug: the vendor's 404 quotes it; a 5xx tenant).
"""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from integration.simulator import VendorSimulator, running_simulator
from tests.engine.canaries import POLLER, Scenario
from watukuy import Engine, FakeClock, MemoryStore, logs
from watukuy.config import RunnerConfig, parse_config

ROUNDS = 4
RUNNER = "runner-logs-1"
DECLARATIVE = "envtenants"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """What :func:`watukuy.logs.configure` changes, put back after the test."""
    root = logging.getLogger()
    before = list(root.handlers)
    levels = {name: logging.getLogger(name).level for name in (logs.ROOT, logs.LIBRDKAFKA)}
    yield
    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    logs.set_runner(None)


@pytest.fixture
async def scenario() -> AsyncIterator[tuple[Scenario, FakeClock]]:
    clock = FakeClock()
    sim = VendorSimulator(tenants=0, items_per_tenant=3, seed=11, now=clock.now)
    async with running_simulator(sim) as base_url:
        yield Scenario.build(sim, base_url), clock


def runner_config(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch, log_format: str
) -> tuple[RunnerConfig, list[str]]:
    """A runner config with a declarative poller whose tenant data and headers are secrets;
    the canary strings those secrets hold."""
    sim = scenario.sim
    failing = sim.add_tenant(slug=f"cnry-env-slug-{secrets.token_hex(4)}", items=3)
    sim.faults(failing.id).error_rate = 1.0
    env = {
        "WATUKUY_LOG_CANARY_SLUG": f"cnry-env-unknown-{secrets.token_hex(4)}",  # the 404 echoes it
        "WATUKUY_LOG_CANARY_TOKEN": f"tok_cnry_env_{secrets.token_hex(8)}",
        "WATUKUY_LOG_CANARY_FAILING_TOKEN": failing.token,
        "WATUKUY_LOG_CANARY_ACCOUNT": f"cnry-env-acct-{secrets.token_hex(4)}",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = parse_config(
        {
            "kafka": {"bootstrap.servers": "127.0.0.1:9"},
            "runner": {"id": RUNNER},
            "log": {"format": log_format, "level": "debug"},
            "pollers": [
                {
                    "name": DECLARATIVE,
                    "partitions": {
                        "static": [
                            {
                                "key": "unknown",
                                "data": {
                                    "slug": "${env:WATUKUY_LOG_CANARY_SLUG}",
                                    "token": "${env:WATUKUY_LOG_CANARY_TOKEN}",
                                },
                            },
                            {
                                "key": "failing",
                                "data": {
                                    "slug": failing.slug,
                                    "token": "${env:WATUKUY_LOG_CANARY_FAILING_TOKEN}",
                                },
                            },
                        ]
                    },
                    "request": {
                        "url": scenario.simulator_url + "/{partition.data.slug}/items",
                        "headers": {"X-Account": "${env:WATUKUY_LOG_CANARY_ACCOUNT}"},
                        "auth": {"bearer": "{partition.data.token}"},
                    },
                    "records": "data",
                    "identity": "id",
                    "cursor": {"token": {"path": "resume", "param": "cursor"}},
                    "schedule": {"min": "30s", "max": "15m"},
                }
            ],
        }
    )
    return config, list(env.values())


async def run_failing_tenants(scenario: Scenario, clock: FakeClock, config: RunnerConfig) -> None:
    http = scenario.http()
    engine = Engine(
        [scenario.poller(), *config.pollers], store=MemoryStore(), clock=clock, http=http
    )
    engine.on(POLLER, scenario.handler)
    async with engine:
        for _ in range(ROUNDS):  # enough failures to open circuits and probe them again
            await engine.tick()
            clock.advance(15 * 60)
        scenario.partitions_error = True
        clock.advance(5 * 60)
        await engine.tick()
    await http.close()


def fields_of_text(line: str) -> dict[str, str]:
    """The ``key=value`` context a text line ends with."""
    out: dict[str, str] = {}
    for word in reversed(line.split(" ")):
        name, sep, value = word.partition("=")
        if not sep or name not in logs.FIELDS:
            break
        out[name] = json.loads(value) if value.startswith('"') else value
    return out


@pytest.mark.parametrize("log_format", ["json", "text"])
async def test_no_canary_in_any_line_and_each_line_of_a_poll_names_its_key(
    scenario: tuple[Scenario, FakeClock],
    monkeypatch: pytest.MonkeyPatch,
    restore_logging: None,
    log_format: str,
) -> None:
    canaries, clock = scenario
    config, env_secrets = runner_config(canaries, monkeypatch, log_format)
    out = io.StringIO()
    log = config.log
    logs.configure(log.format, log.level, config.runner.id, stream=out)

    await run_failing_tenants(canaries, clock, config)

    text = out.getvalue()
    lines = text.splitlines()
    assert len(lines) > 10
    # No canary anywhere: partition data of either poller, nor a ${env:...} value.
    assert canaries.found_in(text) == []
    lowered = text.lower()
    assert [s for s in env_secrets if s.lower() in lowered] == []

    if log_format == "json":
        records = [json.loads(line) for line in lines]  # one object a line, every line
        for record in records:
            assert {"time", "level", "logger", "message"} <= set(record)
            assert record["runner"] == RUNNER
    else:
        records = []
        for line in lines:
            _time, _level, logger, message = line.split(" ", 3)
            known = fields_of_text(line)
            assert known["runner"] == RUNNER, line
            records.append({"logger": logger.rstrip(":"), "message": message, **known})

    # Every line of a poll names poller, partition and lane; the keys are the real ones.
    keys = {(POLLER, t.key) for t in canaries.tenants}
    keys |= {(DECLARATIVE, "unknown"), (DECLARATIVE, "failing")}
    polls = [r for r in records if r["logger"] == "watukuy.poll"]
    assert polls, "no line of a poll was logged"
    for record in polls:
        assert (record.get("poller"), record.get("partition")) in keys, record
        assert record.get("lane") == "live", record
        assert record["message"].startswith(f"{record['poller']}/{record['partition']}: ")
    # Both pollers' failing tenants were heard from, each under its own key.
    logged = {(r["poller"], r["partition"]) for r in polls}
    assert (DECLARATIVE, "unknown") in logged and (DECLARATIVE, "failing") in logged
    assert (POLLER, canaries.tenant("5xx").key) in logged
    # The handler's failure and the failed refresh carry their context too.
    (poison,) = [r for r in records if "parked as poison" in r["message"]]
    assert poison["poller"] == POLLER and poison["partition"] == canaries.tenant("handler").key
    (refresh,) = [r for r in records if "partitions() failed" in r["message"]]
    assert refresh["poller"] == POLLER and "partition" not in refresh


def test_fields_of_text_reads_quoted_values() -> None:
    line = 'time WARNING watukuy.poll: p/: x poller=p partition="" lane=live runner=r'
    assert fields_of_text(line) == {"poller": "p", "partition": "", "lane": "live", "runner": "r"}
