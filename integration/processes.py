"""Process helpers shared by the local broker and registry scripts."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); look at its state where /proc exists.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def end_group(pid: int, first: signal.Signals, timeout: float, step: float = 0.1) -> None:
    """Send ``first`` to ``pid``'s process group, wait up to ``timeout`` seconds for it to
    exit, then SIGKILL it and wait until it is gone."""
    signal_group(pid, first)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(step)
    if alive(pid):
        signal_group(pid, signal.SIGKILL)
        while alive(pid):
            time.sleep(0.1)
