"""CPU time of the processes of a pipeline, including the ones that already exited.

psutil is not a dependency of the project, and ``/proc/PID/stat`` plus ``os.wait4`` give all we
need: a live process's user + system time is read from ``/proc``; a process that exited is
reaped here with ``wait4``, whose ``rusage`` is its exact final CPU time (``/proc`` forgets it
at exit, and the last sample could be a quarter of a second old).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def stat_cpu_seconds(stat: str, ticks: int = CLOCK_TICKS) -> float:
    """User + system CPU seconds in the text of ``/proc/PID/stat``, counting the children it
    waited for (``cutime``, ``cstime``).

    The command name (field 2) is in parentheses and may itself hold spaces or ``)``, so the
    fields are counted from the last ``)``: state is then the first, utime the 12th.
    """
    fields = stat.rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / ticks


def live_cpu_seconds(pid: int) -> float | None:
    """:func:`stat_cpu_seconds` of a live process; ``None`` once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat_cpu_seconds(stat.read())
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class CpuMeter:
    """Sums the CPU of the processes added to it, live or exited (and reaped by it)."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _last: dict[int, float] = field(default_factory=dict)
    _final: dict[int, float] = field(default_factory=dict)

    def add(self, process: subprocess.Popen[bytes]) -> None:
        self.processes.append(process)

    def reap(self) -> None:
        """Collect the exit status and exact CPU time of the processes that exited."""
        for process in self.processes:
            pid = process.pid
            if pid in self._final or process.returncode is not None:
                continue
            try:
                done, status, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: keep its last sample
                self._final[pid] = self._last.get(pid, 0.0)
                continue
            if done:
                self._final[pid] = usage.ru_utime + usage.ru_stime
                # Popen must not wait for it again: it is gone
                process.returncode = os.waitstatus_to_exitcode(status)

    def seconds(self) -> float:
        """CPU seconds of every process so far (reaping the ones that exited first)."""
        self.reap()
        total = 0.0
        for process in self.processes:
            pid = process.pid
            if pid in self._final:
                total += self._final[pid]
                continue
            now = live_cpu_seconds(pid)
            if now is not None:
                self._last[pid] = now
            total += self._last.get(pid, 0.0)
        return total

    def running(self) -> int:
        self.reap()
        return sum(1 for p in self.processes if p.returncode is None)

    def stop(self, process: subprocess.Popen[bytes], signum: int, timeout: float) -> int | None:
        """Signal ``process`` and wait (SIGKILL after ``timeout``); its CPU stays counted."""
        self.reap()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signum)
        deadline = time.monotonic() + timeout
        while process.returncode is None and time.monotonic() < deadline:
            time.sleep(0.05)
            self.reap()
        if process.returncode is None:
            process.kill()
            while process.returncode is None:
                time.sleep(0.05)
                self.reap()
        return process.returncode


def reference_work() -> int:
    """A fixed piece of interpreter work (dict updates, string formatting, small dicts and a
    list): what :class:`MachineSpeed` times."""
    counts: dict[str, int] = {}
    total = 0
    for i in range(20_000):
        name = f"k{i & 1023}"
        counts[name] = counts.get(name, 0) + i
        total += len(name)
    rows = [{"a": i, "b": str(i)} for i in range(5_000)]
    return total + len(rows)


class MachineSpeed:
    """The CPU time :func:`reference_work` takes, sampled every ``every`` seconds on a thread
    of its own while a measurement runs.

    Why: this machine is a VM whose speed varies over time by up to about twice, unseen by the
    load average or the stolen time (the same fixed work measured 5.1 ms of CPU at a load of 5
    and 9.9 ms at a load of 0.9, minutes apart). A CPU figure is comparable with another only
    beside this one; the work costs about 5 ms a sample (0.25% of a core every 2 s).
    """

    def __init__(self, every: float = 2.0) -> None:
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="machine-speed", daemon=True)

    def __enter__(self) -> MachineSpeed:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.thread_time()
            reference_work()
            self.samples.append(1000 * (time.thread_time() - began))
            self._stop.wait(self.every)

    def summary(self) -> str:
        """``median (min..max) ms``, or a dash before any sample."""
        if not self.samples:
            return "-"
        ordered = sorted(self.samples)
        return f"{statistics.median(ordered):.2f} ms ({ordered[0]:.2f}..{ordered[-1]:.2f})"
