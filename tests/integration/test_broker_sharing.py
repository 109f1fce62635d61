"""``integration.kafka.broker.shared``: a local broker started for whoever needs it is stopped
by the last process using it, never from under another one; one started by hand stays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from integration.kafka import broker

ROOT = Path(__file__).resolve().parents[2]
USER = """
import sys
from pathlib import Path
from integration.kafka import broker
with broker.shared(Path(sys.argv[1])) as bootstrap:
    print(bootstrap, flush=True)
    sys.stdin.readline()
"""


def test_the_last_user_out_stops_a_broker_started_for_its_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WATUKUY_BOOTSTRAP", raising=False)
    runtime = tmp_path / "broker"
    first = subprocess.Popen(
        [sys.executable, "-c", USER, str(runtime)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None and first.stdin is not None
        started = first.stdout.readline().strip()
        running = broker.read_running(runtime)
        assert running is not None and running.bootstrap == started
        with broker.shared(runtime) as bootstrap:
            assert bootstrap == started  # joined, not started again
            first.stdin.write("\n")
            first.stdin.flush()
            assert first.wait(60) == 0
            assert broker.read_running(runtime) == running  # the first user left, we did not
        assert broker.read_running(runtime) is None  # the last user out stopped it
    finally:
        first.kill()
        broker.stop(runtime)


def test_a_broker_started_by_hand_outlives_its_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WATUKUY_BOOTSTRAP", raising=False)
    runtime = tmp_path / "broker"
    by_hand = broker.start(runtime)
    try:
        with broker.shared(runtime) as bootstrap:
            assert bootstrap == by_hand.bootstrap
        assert broker.read_running(runtime) == by_hand
    finally:
        broker.stop(runtime)
