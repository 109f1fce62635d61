"""What the idle-tenants benchmark reads of this process, another one and the machine."""

from __future__ import annotations

import os
import resource

from watukuy.core.schedule import KeySchedule, ScheduleSpec, after_poll


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sys_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def stolen_seconds() -> float:
    """CPU time the hypervisor took from this machine's cores (``steal`` in ``/proc/stat``).

    On a virtual machine whose host is busy, stolen time is also billed to whoever ran,
    so the CPU figures above are inflated by about that share; ``nan`` where unknown.
    """
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of another process (``/proc/PID/stat``), ``nan`` if unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    # after "pid (comm)": state is field 3, utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def polls_due(schedules: list[KeySchedule], spec: ScheduleSpec, start: float, end: float) -> int:
    """How many polls these schedules ask for in ``[start, end)``, every poll on time and idle."""
    count = 0
    for sched in schedules:
        while sched.next_due < end:
            count += sched.next_due >= start
            sched = after_poll(spec, sched, sched.next_due, changed=False)
    return count
