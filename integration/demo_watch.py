"""What the demo watches, the way a user would: the events as ``watukuy-source tail`` prints
them, and the per-tenant table of ``watukuy-source status``.

- :class:`Tail` runs ``python -m watukuy.cli tail --from-beginning`` (the ``watukuy-source tail``
  command, a read_committed consumer) as a process of its own; a thread queues its JSON lines so
  the demo can print them between two status tables.
- :class:`Seen` keeps each tenant's sequence numbers in arrival order.
- :func:`read_status` prints the status table into a string (the same code and layout as
  ``watukuy-source status``) and reads the columns it needs back from that text, so what the
  demo reports (owners, circuits) is exactly what the table shows.
"""

from __future__ import annotations

import io
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from integration.demo_pieces import ROOT, stop_process
from watukuy.config import RunnerConfig
from watukuy.core.errors import WatukuyError
from watukuy.status_cli import status

# -- events ------------------------------------------------------------------------------------


class Tail:
    """``watukuy-source tail --config CONFIG --poller POLLER --from-beginning`` (it follows)."""

    def __init__(self, config: Path, poller: str, env: Mapping[str, str], log: Path) -> None:
        self.command = [
            sys.executable, "-m", "watukuy.cli", "tail",
            "--config", str(config), "--poller", poller, "--from-beginning",
        ]  # fmt: skip
        with log.open("ab") as stderr:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=dict(env),
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # Ctrl-C reaches the demo only, which stops it
            )
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="demo-tail", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            self._lines.put(line.rstrip("\n"))

    def lines(self, until: float) -> Iterator[str]:
        """The lines it prints until ``time.monotonic()`` reaches ``until``."""
        while (left := until - time.monotonic()) > 0:
            try:
                yield self._lines.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue

    def stop(self) -> int | None:
        """SIGTERM (SIGKILL after 10 s); the lines already printed stay queued."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._reader.join(5)  # it ends at the pipe's end; then the pipe can be closed
        return stop_process(self.process, signal.SIGKILL, 5)


@dataclass
class Seen:
    """Per tenant, the sequence numbers of its events in arrival (offset) order."""

    sequences: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    ids: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0

    @property
    def total(self) -> int:
        return sum(map(len, self.sequences.values()))

    @property
    def repeated(self) -> int:
        return sum(1 for count in self.ids.values() if count > 1)

    def add(self, line: str) -> None:
        """One line of ``tail``: a JSON event (``partition``, ``sequence``, ``id``, ...)."""
        try:
            event: Any = json.loads(line)
            tenant, sequence = str(event["partition"]), int(event["sequence"])
        except (ValueError, KeyError, TypeError):
            self.unreadable += 1
            return
        self.sequences[tenant].append(sequence)
        self.ids[str(event.get("id"))] += 1


# -- the status table --------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """The columns of one status line the demo follows."""

    partition: str
    state: str
    owner: str | None
    circuit: str


@dataclass(frozen=True)
class Table:
    text: str
    rows: dict[str, Row]
    """Per partition (tenant)."""

    def owners(self) -> dict[str, str]:
        """Tenant -> runner, for the tenants a live runner holds."""
        return {
            tenant: row.owner
            for tenant, row in self.rows.items()
            if row.owner is not None and row.state != "UNASSIGNED"
        }


def read_status(config: RunnerConfig, poller: str) -> Table:
    """``watukuy-source status --poller POLLER``, printed into a string and read back."""
    out, err = io.StringIO(), io.StringIO()
    try:
        status(config, poller, out=out, err=err, tty=False)
    except WatukuyError as exc:  # e.g. no runner has created the status topic yet
        return Table(f"watukuy-source: {exc}\n", {})
    text = out.getvalue() or err.getvalue()
    return Table(text, parse_status(text, poller))


def parse_status(text: str, poller: str) -> dict[str, Row]:
    """The rows of a plain-text status table: ``POLLER PARTITION STATE OWNER LAG CIRCUIT ...``
    (no cell of these columns holds a space; a FAILED key's error line starts ``poller/key:``)."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == poller:
            partition, state, owner, circuit = cells[1], cells[2], cells[3], cells[5]
            rows[partition] = Row(partition, state, None if owner == "-" else owner, circuit)
    return rows


def framed(table: Table, title: str, *notes: str, out: TextIO = sys.stdout) -> None:
    """The table (and ``notes`` under it) between two rules, so it stands out among the event
    lines."""
    rule = "─" if (getattr(out, "encoding", "") or "").lower().replace("-", "") == "utf8" else "-"
    out.write(f"\n{rule * 3} {title} {rule * max(3, 72 - len(title))}\n")
    out.write(table.text.rstrip("\n") + "\n")
    out.writelines(f"{note}\n" for note in notes)
    out.write(rule * 78 + "\n\n")
    out.flush()
