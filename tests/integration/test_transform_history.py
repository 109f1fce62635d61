"""``watukuy-source validate`` warns when a poller's transform changed since it last published
(issue 23), from the ``transform/`` records a runner writes to ``<prefix>.status`` on a real
broker; and neither the records nor the warning show the HMAC key."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from integration.demo import Simulator, example_config, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import latest_values
from tests.integration.runners import ROOT, Runner, runner_env, wait_for
from watukuy.config import load_config
from watukuy.control.activetopics import Published
from watukuy.control.status import StatusTopic
from watukuy.control.transformrecords import fingerprint_of
from watukuy.core.inspect import PollerInspect
from watukuy.store.kafka.clients import admin_client
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

PII_KEY = "pii-k3y-never-shown"
T1 = {"select": ["id", "email"], "mask": {"email": {"hmac": "${env:PII_KEY}"}}}
T2 = {"select": ["id", "email"], "mask": {"email": {"redact": "***"}}}
WARNING = (
    "watukuy-source: warning: users: its transform changed since it last published; "
    "only items polled from now on are published the new way"
)


def _config(tmp_path: Path, bootstrap: str, prefix: str, transform: Any) -> Path:
    poller: dict[str, Any] = {
        "name": "users",
        "request": {"url": "https://vendor.test/users"},
        "identity": "id",
    }
    if transform is not None:
        poller["transform"] = transform
    config = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": prefix, "partitions": 3},
        "runner": {"id": "validate-test"},
        "pollers": [poller],
    }
    path = tmp_path / f"runner-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _validate(config: Path, key: str = PII_KEY) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "watukuy.cli", "validate", "--config", str(config)],
        cwd=ROOT,
        env=runner_env("http://127.0.0.1:9", PII_KEY=key),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _published(sequence: int) -> list[PollerInspect]:
    return [
        PollerInspect(
            poller="users",
            partition="acme",
            paused=False,
            circuit="closed",
            interval=1.0,
            next_due=None,
            lag=None,
            parked={"invalid": 0, "poison": 0},
            sequence=sequence,
        )
    ]


def _topic_of(found: Published) -> str:
    return f"events.{found.poller}"


@pytest.fixture
async def status(kafka_bootstrap: str, prefix: str) -> AsyncIterator[StatusTopic]:
    """A runner's status topic writer on the test's prefix."""
    layout = TopicLayout(prefix, partitions=3, replication_factor=1)
    ensure_topics(admin_client({"bootstrap.servers": kafka_bootstrap}), layout, [])
    topic = StatusTopic(
        {"bootstrap.servers": kafka_bootstrap},
        layout,
        runner_id="r1",
        session_timeout=10,
        heartbeats=False,
    )
    await topic.start()
    yield topic
    await topic.stop()


async def _run_with(status: StatusTopic, config: Path, sequence: int) -> None:
    """What a runner with ``config`` does after its key ``users/acme`` reached ``sequence``."""
    fingerprints = {p.name: fingerprint_of(p) for p in load_config(config).pollers}
    await status.list_topics(_published(sequence), _topic_of, fingerprints)


async def test_validate_warns_when_the_transform_differs_from_the_last_published_one(
    tmp_path: Path,
    kafka_bootstrap: str,
    prefix: str,
    status: StatusTopic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PII_KEY", PII_KEY)
    first = _config(tmp_path, kafka_bootstrap, prefix, T1)
    second = _config(tmp_path, kafka_bootstrap, prefix, T2)

    await _run_with(status, first, sequence=0)  # nothing published yet: nothing recorded
    done = _validate(second)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr

    await _run_with(status, first, sequence=3)  # published with T1
    done = _validate(first)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    assert done.stderr.splitlines()[-1] == f"watukuy-source: {first} is valid"

    done = _validate(second)
    assert done.returncode == 0, done.stderr
    [warning] = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warning.startswith(WARNING), done.stderr
    assert "watukuy-source replay --poller users" in warning
    assert done.stderr.splitlines()[-1] == f"watukuy-source: {second} is valid"

    rotated = _validate(first, key="another-key")  # same spec, the HMAC key rotated
    assert [line for line in rotated.stderr.splitlines() if "warning" in line] == [warning]

    removed = _validate(_config(tmp_path, kafka_bootstrap, prefix, {"select": []}))
    assert "warning: users: its transform was removed since it last published" in removed.stderr

    await _run_with(status, second, sequence=4)  # the runner now publishes with T2
    assert "warning" not in _validate(second).stderr
    assert "warning" in _validate(first).stderr

    records = latest_values(kafka_bootstrap, f"{prefix}.status")
    assert b"transform/users" in records
    written = b"".join(value or b"" for value in records.values())
    for shown in (written.decode(), done.stdout, done.stderr, rotated.stdout, rotated.stderr):
        assert PII_KEY not in shown and "another-key" not in shown


def test_an_unreachable_kafka_is_one_line_and_validate_still_passes(tmp_path: Path) -> None:
    config = _config(tmp_path, "127.0.0.1:1", "nowhere", T2)
    text = yaml.safe_load(config.read_text())
    text["runner"]["startup.timeout"] = "1s"
    config.write_text(yaml.safe_dump(text))
    done = _validate(config)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "transform history" in line]
    assert notes == [
        "watukuy-source: note: the transform history could not be checked: "
        "cannot reach Kafka at 127.0.0.1:1 within 1s; check kafka.bootstrap.servers "
        "(runner.startup.timeout)"
    ], done.stderr
    assert "librdkafka" not in done.stderr  # its connection failures: the note says it all


def test_a_runner_that_published_records_its_transform_for_validate(
    kafka_bootstrap: str,
    prefix: str,
    simulator_process: Callable[..., Simulator],
    tmp_path: Path,
) -> None:
    """The whole way: a runner process publishes with T1; validate with T1 is quiet, with
    another transform it warns."""
    simulator = simulator_process(2, 3)
    passing = {"filter": {"path": "id", "exists": True}}  # every item: the schema still holds
    paths = {}
    for label, transform in (("t1", passing), ("t2", passing | {"drop": ["note"]})):
        example = example_config({"min": "1s", "max": "2s"})
        example["pollers"][0]["transform"] = transform
        config = runner_config(kafka_bootstrap, prefix, "transform-1", example=example)
        config["runner"]["session.timeout"] = "6s"
        paths[label] = write_runner_config(tmp_path / f"{label}.yaml", config)
    env = runner_env(simulator.base_url)
    runner = Runner("transform-1", paths["t1"], env, tmp_path / "r.log").start()
    try:
        wait_for(
            lambda: b"transform/invoices" in latest_values(kafka_bootstrap, f"{prefix}.status"),
            90,
            "the runner's transform record",
            step=1.0,
        )
    finally:
        assert runner.stop() == 0, runner.output()

    def validate(config: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "watukuy.cli", "validate", "--config", str(config)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    same, changed = validate(paths["t1"]), validate(paths["t2"])
    assert same.returncode == changed.returncode == 0, same.stderr + changed.stderr
    assert "warning" not in same.stderr
    assert "warning: invoices: its transform changed since it last published" in changed.stderr
