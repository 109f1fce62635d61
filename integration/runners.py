"""Runner instances as real processes, for the fault suite and the integration tests.

A runner is ``python -m watukuy.cli --config F`` or, with fault options (possibly none),
``python -m integration.faults.runner --config F ...``: the fault-injecting Kafka clients. It
is SIGKILLed and SIGSTOPped like any deployment and watched only through Kafka (its group's
assignments, the topics), its log and its exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient

from integration.demo_pieces import ROOT, runner_env

__all__ = ["ROOT", "RunnerProcess", "assignments", "command", "runner_env", "wait_for"]

T = TypeVar("T")


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str, step: float = 0.25) -> T:
    """``predicate()``'s first truthy value within ``timeout`` seconds, else TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)


def command(config: Path, faults: Sequence[str] | None = None, *, debug: bool = False) -> list[str]:
    """The plain runner, or with ``faults`` (possibly none) the fault-injecting one."""
    module = "watukuy.cli" if faults is None else "integration.faults.runner"
    debugging = ["--debug"] if debug else []
    return [sys.executable, "-m", module, *debugging, "--config", str(config), *(faults or [])]


@dataclass
class RunnerProcess:
    """One runner instance: its config, its log, and the process while it runs.

    ``faults`` are options of ``integration.faults.runner`` (see :func:`command`); ``command``
    is what the next :meth:`start` runs, which a caller may change before it.
    """

    name: str
    config: Path
    env: dict[str, str]
    log: Path
    faults: Sequence[str] | None = None
    runner_id: str = ""  # its ``runner.id``; its name unless told
    debug: bool = False
    # A "---- start N at T" line in the log before each start; off for a log a test parses
    # line by line.
    start_lines: bool = True
    command: list[str] = field(init=False)
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    starts: int = field(default=0, init=False)
    _log_from: int = field(default=0, init=False)  # where this start's lines begin in the log

    def __post_init__(self) -> None:
        self.runner_id = self.runner_id or self.name
        self.command = command(self.config, self.faults, debug=self.debug)

    def arm(self, faults: Sequence[str] | None) -> None:
        """Give the next start these fault options (None: the plain runner)."""
        self.faults = faults
        self.command = command(self.config, faults, debug=self.debug)

    def start(self) -> RunnerProcess:
        if self.running:
            raise RuntimeError(f"runner {self.name} is already running")
        self.starts += 1
        with self.log.open("ab") as handle:
            if self.start_lines:
                handle.write(f"---- start {self.starts} at {time.time():.3f}\n".encode())
                handle.flush()
            self._log_from = handle.tell()
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the harness does not reach it by surprise
            )
        return self

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.running and self.process is not None:
            os.kill(self.process.pid, signum)

    def kill(self) -> int | None:
        """SIGKILL, no goodbye: an open transaction stays open until the broker aborts it."""
        self.signal(signal.SIGKILL)
        return self.wait(15)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM (after SIGCONT, should it be stopped) and wait for it to leave; the exit
        code. A runner still there after ``timeout`` is killed."""
        if self.process is None:
            return None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int | None:
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(15)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def since_start(self) -> str:
        """The log lines of the current (or last) start."""
        with self.log.open("rb") as handle:
            handle.seek(self._log_from)
            return handle.read().decode(errors="replace")

    def wait_started(self, timeout: float = 60) -> None:
        """Until this start logged ``runner <id> started`` (it handles SIGTERM from then on)."""
        marker = f"runner {self.runner_id} started"

        def started() -> bool:
            if not self.running:
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"runner {self.name} exited with {code} while starting")
            return marker in self.since_start()

        wait_for(started, timeout, f"runner {self.name} to start")

    def dump_stacks(self, path: Path) -> None:
        """Every thread's stack, by py-spy if it is installed (where a stuck runner waits)."""
        spy = Path(sys.executable).with_name("py-spy")
        if not self.running or self.pid is None or not spy.exists():
            return
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(
                [str(spy), "dump", "--pid", str(self.pid)],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            path.write_text(done.stdout + done.stderr)


def assignments(bootstrap: str, group: str) -> dict[str, set[int]]:
    """Which runner (group.instance.id) holds which partitions of the state topic now."""
    # log_level 2: a coordinator still loading is expected here, not worth librdkafka's noise.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    try:
        described = admin.describe_consumer_groups([group])[group].result(timeout=15)
    except (KafkaException, TimeoutError):  # a coordinator still loading: no view yet
        return {}
    if described.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        return {}
    return {
        (m.group_instance_id or m.client_id): {tp.partition for tp in m.assignment.topic_partitions}
        for m in described.members
    }
