"""``python -m integration.kafka.matrix [--versions 3.9.1,4.4.0] [--suites integration,faults]``
(``make test-versions``): the integration tier and the fault suite's short profile on each
Kafka release of the matrix, then one table of what passed.

By default the matrix is the oldest supported line's release and the default release
(:func:`integration.kafka.versions.matrix_versions`). Every (release, suite) run gets a broker
of its own, started here in ``<workdir>/<release>/<suite>/broker`` and handed to the suite as
``WATUKUY_BOOTSTRAP``, so no run shares a broker with another, nor with a demo or a test session
of the same checkout; the brokers a suite starts for itself (a fault scenario's private one,
a cluster) get the release through ``WATUKUY_KAFKA_VERSION``. Each run's output, JUnit report
and broker log stay in its directory. The suites run one after the other: on two cores, two
at once would fail on time, not on Kafka. Not part of ``make test``: CI's time is spent.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from integration.kafka.versions import ENV, line_of, matrix_versions
from integration.processes import end_group

REPO = Path(__file__).resolve().parents[2]
DEFAULT_WORKDIR = REPO / ".watukuy" / "matrix"
SUITES = ("integration", "faults")
SUITE_TIMEOUT = 3600.0


@dataclass
class Run:
    """One suite on one release."""

    version: str
    suite: str
    where: Path
    passed: bool = False
    detail: str = ""
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def suite_command(suite: str, where: Path) -> list[str]:
    """The command of ``suite``, its reports written under ``where``."""
    if suite == "integration":
        # As `make test` runs them (two workers, tests/conftest.py), without the cluster tier.
        return [
            sys.executable, "-m", "pytest", "-n", "2", "-m", "integration and not cluster",
            "-p", "no:cacheprovider", f"--junitxml={where / 'junit.xml'}",
        ]  # fmt: skip
    if suite == "faults":
        return [
            sys.executable, "-m", "integration.faults", "--profile", "short",
            "--workdir", str(where / "faults"),
        ]  # fmt: skip
    raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")


def suite_env(version: str, bootstrap: str | None) -> dict[str, str]:
    """The environment of a run on ``version``: that release, and the run's own broker (an
    outer ``WATUKUY_BOOTSTRAP`` would send the suite to another broker of another release)."""
    env = {k: v for k, v in os.environ.items() if k != "WATUKUY_BOOTSTRAP"}
    env[ENV] = version
    env["PYTHONUNBUFFERED"] = "1"
    if bootstrap is not None:
        env["WATUKUY_BOOTSTRAP"] = bootstrap
    return env


def wait_for_quiet(max_load: float) -> None:
    """Wait while the 1-minute load is above ``max_load`` (0: do not wait): a suite started on
    a busy machine fails on its timings, which says nothing of the Kafka release."""
    if max_load <= 0:
        return
    while (load := os.getloadavg()[0]) > max_load:
        print(f"matrix: load {load:.1f} > {max_load:g}, waiting ...", file=sys.stderr, flush=True)
        time.sleep(30)


def broker_cli(version: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "integration.kafka.broker", *args],
        cwd=REPO, env=suite_env(version, None), capture_output=True, text=True, check=False,
    )  # fmt: skip


def run_one(version: str, suite: str, workdir: Path, timeout: float) -> Run:
    """``suite`` on a fresh broker of ``version`` of its own; the broker is stopped after."""
    where = workdir / version / suite
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    run = Run(version, suite, where)
    began = time.monotonic()
    broker = where / "broker"
    started = broker_cli(version, "start", "--dir", str(broker))
    if started.returncode != 0:
        run.detail = f"the broker did not start: {started.stderr.strip()[-300:]}"
        return run
    try:
        bootstrap = started.stdout.strip().splitlines()[-1]  # what `start` prints last
        code = _run_suite(suite, where, suite_env(version, bootstrap), timeout)
    finally:
        if (broker / "server.log").exists():
            shutil.copyfile(broker / "server.log", where / "broker-server.log")
        broker_cli(version, "stop", "--dir", str(broker))
    run.seconds = time.monotonic() - began
    run.passed = code == 0
    run.detail, run.failures = summary(suite, where, code)
    return run


def _run_suite(suite: str, where: Path, env: dict[str, str], timeout: float) -> int | None:
    """The suite's exit code, or None if it ran past ``timeout`` (its processes are killed)."""
    with open(where / "output.log", "wb") as out:
        proc = subprocess.Popen(
            suite_command(suite, where), cwd=REPO, env=env, stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # a timeout ends the runners and simulators it started too
        )  # fmt: skip
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            end_group(proc.pid, signal.SIGTERM, 30)
            proc.wait()
            return None


def summary(suite: str, where: Path, code: int | None) -> tuple[str, list[str]]:
    """A run's counts in words, and the names of what failed."""
    if code is None:
        return "timed out", []
    if suite == "integration":
        return _junit_summary(where / "junit.xml", code)
    return _faults_summary(where / "output.log", code)


def _junit_summary(report: Path, code: int) -> tuple[str, list[str]]:
    try:
        root = ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError):
        return f"exit code {code}, no JUnit report", []
    cases = list(root.iter("testcase"))
    failed = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in cases
        if case.find("failure") is not None or case.find("error") is not None
    ]
    skipped = sum(1 for case in cases if case.find("skipped") is not None)
    passed = len(cases) - len(failed) - skipped
    return f"{passed} passed, {len(failed)} failed, {skipped} skipped", failed


def _faults_summary(output: Path, code: int) -> tuple[str, list[str]]:
    """Counted from the table ``python -m integration.faults`` prints (last cell: yes/NO)."""
    cells = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in output.read_text(errors="replace").splitlines()
        if line.startswith("| ")
    ]
    rows = [row for row in cells if row[-1] in ("yes", "NO")]  # not the header
    if not rows:
        return f"exit code {code}, no scenario table", []
    failed = [row[0] for row in rows if row[-1] == "NO"]
    return f"{len(rows) - len(failed)} of {len(rows)} scenarios ok", failed


def table(runs: Sequence[Run]) -> str:
    """The runs as a Markdown table, then what failed in each."""
    lines = [
        "| Kafka | suite | result | detail | time |",
        "|-------|-------|--------|--------|------|",
    ]
    for run in runs:
        verdict = "passed" if run.passed else "FAILED"
        minutes, seconds = divmod(round(run.seconds), 60)
        lines.append(
            f"| {run.version} | {run.suite} | {verdict} | {run.detail} | "
            f"{minutes} min {seconds:02d} s |"
        )
    for run in runs:
        for name in run.failures:
            lines.append(f"- {run.version} {run.suite}: {name} (see {run.where}/output.log)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.kafka.matrix", description=__doc__)
    parser.add_argument("--versions", default=",".join(matrix_versions()))
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--timeout", type=float, default=SUITE_TIMEOUT, help="seconds per run")
    parser.add_argument(
        "--max-load", type=float, default=0.0,
        help="before each run, wait while the 1-minute load is above this (0: do not wait)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    for version in versions:
        line_of(version, "--versions")  # every release checked before the first run, not an hour in
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not versions or not suites:
        parser.error(f"--suites takes {', '.join(SUITES)}; --versions and --suites not empty")
    runs = []
    for version in versions:
        for suite in suites:
            wait_for_quiet(args.max_load)
            print(f"matrix: Kafka {version}, {suite} ...", file=sys.stderr, flush=True)
            run = run_one(version, suite, args.workdir.resolve(), args.timeout)
            verdict = "passed" if run.passed else "FAILED"
            print(f"matrix: Kafka {version}, {suite}: {verdict} ({run.detail})", file=sys.stderr)
            runs.append(run)
    print(table(runs))
    return 0 if all(run.passed for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
