"""``make demo`` run headless, as a user runs it: ``python -m integration.demo`` in a process of
its own, watched only through what it prints, its exit code and the processes it names."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from confluent_kafka.admin import AdminClient

from integration.processes import alive
from tests.integration.runners import ROOT

DEMO = [sys.executable, "-m", "integration.demo"]
PIDS = re.compile(r"\(pid (\d+)")
STATUS_ROW = re.compile(r"^invoices\s+(t_\d+)\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)")


class Demo:
    """The demo process and every line it has printed so far."""

    def __init__(self, bootstrap: str, tmp: Path, *options: str) -> None:
        env = dict(os.environ, WATUKUY_BOOTSTRAP=bootstrap, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [*DEMO, "--dir", str(tmp / "demo"), *options],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if re.search(pattern, line):
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r}; output:\n{self.output}")

    def finish(self, timeout: float) -> int:
        try:
            rc = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise AssertionError(
                f"the demo did not end within {timeout}s:\n{self.output}"
            ) from None
        self._reader.join(10)
        return rc

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def pids(self) -> dict[int, str]:
        """Every process the demo says it started, by pid."""
        return {int(pid): line for line in self.lines for pid in PIDS.findall(line)}

    def prefix(self) -> str:
        found = re.search(r"topics (demo-[0-9a-f]+)\.\*", self.output)
        assert found, self.output
        return found.group(1)


def events(lines: list[str]) -> dict[str, list[int]]:
    """Per tenant, the sequences of the decoded events printed (tail's JSON lines)."""
    sequences: dict[str, list[int]] = defaultdict(list)
    for line in lines:
        if line.startswith("{"):
            event = json.loads(line)
            assert event["poller"] == "invoices" and event["type"] in ("created", "updated")
            assert {"id", "subject", "version", "time", "data"} <= event.keys()
            sequences[event["partition"]].append(event["sequence"])
    return sequences


def assert_nothing_left(demo: Demo, bootstrap: str, started: int) -> None:
    """None of the processes the demo named is running, and its topics are gone."""
    pids = demo.pids()
    assert len(pids) >= started, demo.output
    running = {pid: line for pid, line in pids.items() if alive(pid)}
    assert not running, f"still running after the demo ended: {running}"
    prefix = demo.prefix()
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    left = [t for t in topics if t.startswith(prefix + ".")]
    assert not left, f"{left}\n{demo.output[-3000:]}"  # the demo says why one was not deleted


def test_demo_moves_a_killed_runners_tenants_without_a_gap_and_ctrl_c_stops_everything(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    demo = Demo(
        kafka_bootstrap, tmp_path,
        "--seconds", "150", "--kill-after", "0", "--status-every", "2", "--tenants", "4",
    )  # fmt: skip
    try:
        moved = demo.wait_for(r"^demo: .* moved from demo-[ab] to demo-[ab] ", 150)
        time.sleep(2)  # a few of the survivor's events after the move
        demo.process.send_signal(signal.SIGINT)  # Ctrl-C
        rc = demo.finish(90)
    finally:
        if demo.process.poll() is None:
            demo.process.kill()
    output = demo.output
    assert rc == 130, output  # interrupted, yet it stopped and summarized everything

    # Events arrived, decoded as tail prints them; every tenant's sequence is 1, 2, 3, ...
    sequences = events(demo.lines)
    assert sum(map(len, sequences.values())) > 0, output
    for tenant, numbers in sequences.items():
        assert numbers == list(range(1, len(numbers) + 1)), (tenant, numbers)

    # The failing tenant (the last) shows FAILED with its circuit open in a status table; the
    # rate-limited one (the second) still got its events.
    rows = [m.groups() for line in demo.lines if (m := STATUS_ROW.match(line))]
    assert ("t_0004", "FAILED") in {(tenant, state) for tenant, state, _, circuit in rows}
    assert any(tenant == "t_0004" and circuit == "open" for tenant, _, _, circuit in rows)
    assert "t_0004" not in sequences
    assert sequences.get("t_0002"), output

    # The killed runner's tenants moved: the table's owner column says the survivor.
    victim, survivor = re.findall(r"from (demo-[ab]) to (demo-[ab])", moved)[0]
    killed = demo.wait_for(rf"^demo: SIGKILL runner {victim} \(pid \d+\), the owner of ", 1)
    tenants = re.findall(r"t_\d+", killed.split("the owner of ")[1])
    assert tenants and tenants == re.findall(r"t_\d+", moved.split(" moved from")[0])
    last = {tenant: owner for tenant, _, owner, _ in rows}
    assert all(last[tenant] == survivor for tenant in tenants), output
    summary = [line for line in demo.lines if re.match(r"^\s+t_\d+\s+\d+\s", line)]
    assert any("(moved)" in line for line in summary), output
    assert re.search(r"^demo: ok: \d+ tenant\(s\) moved from demo-[ab] without a gap", output, re.M)

    # The tracker connector's streams published, children keyed under their parents, and no
    # e-mail address or internal note reached Kafka in the clear.
    clear = "no e-mail or note in the clear"
    for stream in ("projects", "users"):
        assert re.search(rf"^demo: tracker\.{stream}: [1-9]\d* events .*; {clear}$", output, re.M)
    child = r"keys like t_\d+/\S+"
    assert re.search(rf"^demo: tracker\.issues: [1-9]\d* events .*{child}; {clear}$", output, re.M)
    grandchild = r"keys like t_\d+/\S+/\S+"
    assert re.search(rf"^demo: tracker\.comments: [1-9]\d* .*{grandchild}; {clear}$", output, re.M)

    # Webhooks (issue 46): the tracker polls every 15 minutes, yet a project renamed at the
    # vendor was readable on Kafka within seconds, its webhook answered 202.
    hooked = r"^demo: project t_0001/\S+ renamed at the vendor: its webhook's 202 after [\d.]+s, "
    found = re.search(hooked + r"its event readable on Kafka ([\d.]+)s after", output, re.M)
    assert found and float(found.group(1)) < 10, output

    assert_nothing_left(demo, kafka_bootstrap, 4)  # the simulator, two runners, the tail


def test_demo_whose_window_ends_before_any_move_fails_and_leaves_nothing_running(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    demo = Demo(kafka_bootstrap, tmp_path, "--seconds", "6", "--kill-after", "60", "--tenants", "3")
    rc = demo.finish(120)
    assert rc == 1, demo.output  # its window ended with no runner killed, so nothing moved
    assert re.search(r"^demo: the 6s window is over$", demo.output, re.M), demo.output
    assert re.search(r"^demo: FAILED: .*no runner was killed", demo.output, re.M), demo.output
    assert_nothing_left(demo, kafka_bootstrap, 3)  # the simulator and two runners at least
