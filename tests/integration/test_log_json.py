"""A real runner process with ``log: {format: json}`` on the real broker: everything it
writes is one JSON object a line, each with its runner id; the restore of a state partition
says its lease generation, a failing tenant's polls say poller, partition and lane, and no
line holds a tenant's data or a ``${env:...}`` secret."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from integration.demo import Simulator, example_config, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.runners import Runner, runner_env, wait_for

pytestmark = pytest.mark.integration

RUNNER = "logs-json-1"
GONE = "gone"  # a poller whose one tenant the vendor does not know: every poll is a 404


def _records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _seen(runner: Runner) -> bool:
    records = _records(runner.output())
    restored = any(r["message"].startswith("restored partition") for r in records)
    polled = any(r["logger"] == "watukuy.poll" and r.get("poller") == GONE for r in records)
    return restored and polled


def test_a_json_log_is_one_object_a_line_with_the_context_and_no_secret(
    kafka_bootstrap: str,
    prefix: str,
    simulator_process: Callable[..., Simulator],
    tmp_path: Path,
) -> None:
    sim = simulator_process(2, 3)
    slug = f"cnry-log-slug-{secrets.token_hex(4)}"
    token = f"tok_cnry_log_{secrets.token_hex(8)}"
    config = runner_config(
        kafka_bootstrap, prefix, RUNNER, example=example_config({"min": "1s", "max": "2s"})
    )
    config["log"] = {"format": "json", "level": "info"}
    config["pollers"].append(
        {
            "name": GONE,
            "partitions": {
                "static": [{"key": GONE, "data": {"slug": slug, "token": "${env:LOG_TOKEN}"}}]
            },
            "request": {
                "url": "${env:WATUKUY_VENDOR_URL}/{partition.data.slug}/items",
                "auth": {"bearer": "{partition.data.token}"},
            },
            "records": "data",
            "identity": "id",
            "cursor": {"token": {"path": "resume", "param": "cursor"}},
            "schedule": {"min": "1s", "max": "2s"},
        }
    )
    path = write_runner_config(tmp_path / "runner.yaml", config)
    env = runner_env(sim.base_url, LOG_TOKEN=token)
    runner = Runner(RUNNER, path, env, tmp_path / "runner.log").start()  # with --debug
    try:
        wait_for(lambda: _seen(runner), 90, "a restore and a poll of the failing tenant")
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]

    text = runner.output()
    records = _records(text)  # raises on any line that is not JSON
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record), record
        assert record["runner"] == RUNNER, record
    restored = [r for r in records if r["message"].startswith("restored partition")]
    assert all(isinstance(r["generation"], int) for r in restored)
    polls = [r for r in records if r["logger"] == "watukuy.poll"]
    assert polls
    for record in polls:
        assert (record["poller"], record["lane"]) in {(GONE, "live"), ("invoices", "live")}
        assert record["message"].startswith(f"{record['poller']}/{record['partition']}: ")
    # The tenant's data and every secret: neither in a message nor anywhere else on a line.
    canaries = [slug, token, *(tenant["token"] for tenant in sim.tenants)]
    assert [c for c in canaries if c in text] == []
