"""``watukuy-source`` as an operator meets it: one-line errors with a non-zero exit, and a
clean exit on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.kafka_support import delete_prefix, unique_prefix
from tests.integration.runners import ROOT, runner_env, wait_for


def _run(config: Path, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "watukuy.cli", *extra, "--config", str(config)],
        cwd=ROOT,
        env=runner_env("http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _config(tmp_path: Path, bootstrap: str, **changes: object) -> Path:
    config: dict[str, object] = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": unique_prefix(), "partitions": 2},
        "runner": {"id": "cli-test"},
        "rest": {"listen": "127.0.0.1:0"},
        "pollers": [{"python": "integration.pollers:invoices"}],
    }
    config.update(changes)
    path = tmp_path / "runner.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("watukuy-source:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_bad_config_key_is_named_on_one_line(tmp_path: Path, kafka_bootstrap: str) -> None:
    config = _config(tmp_path, kafka_bootstrap, runner={"id": "x", "comit.interval": "1s"})
    done = _run(config)
    assert done.returncode == 2
    assert "runner.comit.interval" in _one_line(done.stderr)


def test_a_poller_module_that_does_not_import_is_named(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    config = _config(tmp_path, kafka_bootstrap, pollers=[{"python": "nowhere.pollers:x"}])
    done = _run(config)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert "pollers[0].python" in line and "nowhere" in line


def _unreachable_line(timeout: str) -> str:
    return (
        f"watukuy-source: cannot reach Kafka at 127.0.0.1:1 within {timeout}; "
        "check kafka.bootstrap.servers (runner.startup.timeout)"
    )


def _few_lines_ending_with(stderr: str, last: str) -> None:
    lines = stderr.splitlines()
    assert 1 <= len(lines) <= 3, stderr  # librdkafka's reason once, then ours
    assert lines[-1] == last, stderr
    assert "Traceback" not in stderr


def test_an_unreachable_broker_ends_the_start_with_one_line(tmp_path: Path) -> None:
    # A short runner.startup.timeout: what the line says and when it comes do not depend on it.
    config = _config(tmp_path, "127.0.0.1:1", runner={"id": "cli-test", "startup.timeout": "4s"})
    started = time.monotonic()
    done = _run(config, timeout=90)
    assert done.returncode == 1
    _few_lines_ending_with(done.stderr, _unreachable_line("4s"))
    assert "Connection refused" in done.stderr  # why, from librdkafka, once
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "command",
    [
        ["reset", "--poller", "invoices", "--partition", "acme"],
        ["replay", "--poller", "invoices", "--partition", "acme", "--from", "2h"],
        ["tail", "--poller", "invoices"],
    ],
    ids=lambda command: command[0],
)
def test_an_unreachable_broker_ends_each_command_with_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    config = _config(tmp_path, "127.0.0.1:1", runner={"id": "cli-test", "startup.timeout": "3s"})
    started = time.monotonic()
    done = _run(config, *command, timeout=60)
    assert done.returncode == 1, done.stderr
    _few_lines_ending_with(done.stderr, _unreachable_line("3s"))
    assert time.monotonic() - started < 30


def test_an_unknown_kafka_property_fails_validate(tmp_path: Path, kafka_bootstrap: str) -> None:
    kafka = {"bootstrap.servers": kafka_bootstrap, "linger.msx": 5}
    done = _run(_config(tmp_path, kafka_bootstrap, kafka=kafka), "validate")
    assert done.returncode == 2
    assert _one_line(done.stderr) == (
        "watukuy-source: kafka.linger.msx: is not a librdkafka property; did you mean 'linger.ms'?"
    )


def test_options_go_before_the_subcommand_too(tmp_path: Path, kafka_bootstrap: str) -> None:
    config = _config(tmp_path, kafka_bootstrap)
    done = subprocess.run(
        [sys.executable, "-m", "watukuy.cli", "--config", str(config), "validate"],
        cwd=ROOT,
        env=runner_env("http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == f"watukuy-source: {config} is valid"


def test_validate_prints_the_config_without_secrets(tmp_path: Path, kafka_bootstrap: str) -> None:
    config = _config(
        tmp_path,
        kafka_bootstrap,
        kafka={"bootstrap.servers": kafka_bootstrap, "sasl.password": "${env:CANARY_SECRET}"},
    )
    env = runner_env("http://127.0.0.1:9", CANARY_SECRET="s3cr3t-canary")
    done = subprocess.run(
        [sys.executable, "-m", "watukuy.cli", "validate", "--config", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "s3cr3t-canary" not in done.stdout + done.stderr
    assert "[redacted]" in done.stdout


def test_sigterm_stops_a_runner_cleanly(tmp_path: Path, kafka_bootstrap: str) -> None:
    config = _config(tmp_path, kafka_bootstrap)
    prefix = yaml.safe_load(config.read_text())["topics"]["prefix"]
    log = tmp_path / "runner.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "watukuy.cli", "--config", str(config)],
            cwd=ROOT,
            env=runner_env("http://127.0.0.1:9"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "restored partition" in log.read_text(), 60, "the runner to own keys")
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()[-2000:]
        text = log.read_text()
        assert "stopping" in text and "Traceback" not in text
    finally:
        if process.poll() is None:
            process.kill()
        delete_prefix(kafka_bootstrap, prefix)
