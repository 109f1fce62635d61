"""``watukuy-source status``: the per-partition table of ``<prefix>.status``.

It reads the whole status topic (what every runner last reported of each key it owns, and
their heartbeats) and prints one line per key: poller, partition, state, owner, lag, circuit,
parked counts and backfill progress. A key whose owner stopped cleanly or whose heartbeat is
older than ``runner.session.timeout`` shows UNASSIGNED, and so does a key whose owner waits
for a newer release to run it (a rolling upgrade), with a line saying so. On a terminal,
running backfills get a progress bar where their end is known; otherwise the output is plain
text for scripts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from watukuy.config import RunnerConfig
from watukuy.control.keystatus import BackfillProgress, KeyStatus, StatusTable
from watukuy.control.reader import Message, MissingTopic, TopicReader
from watukuy.core.durations import age_text
from watukuy.core.errors import ConfigError, StateCorrupted, WatukuyError
from watukuy.core.lifecycle import TaskState
from watukuy.core.poller import StreamOf
from watukuy.store.kafka import clients
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["render", "status"]

log = logging.getLogger("watukuy.control")

COLUMNS = ("POLLER", "PARTITION", "STATE", "OWNER", "LAG", "CIRCUIT", "PARKED", "BACKFILL")
STREAM_COLUMNS = ("CONNECTOR", "STREAM", *COLUMNS[1:])
"""The columns when a connector with streams is shown: its rows together, by stream."""
BAR_WIDTH = 20
MAX_CURSOR = 32  # characters of a backfill cursor shown in the table
# States whose key's last_error says why it is in them (a gone owner's UNASSIGNED keys have
# none: StatusTable.view drops it).
REASONED = (TaskState.FAILED, TaskState.UNASSIGNED, TaskState.NEEDS_AUTHORIZATION)


def status(
    config: RunnerConfig,
    poller: str | None,
    *,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    clock: Callable[[], float] = time.time,
    tty: bool | None = None,
) -> int:
    """Print the table; return how many keys it shows. ``tty`` defaults to ``out.isatty()``."""
    topics = config.topics
    layout = TopicLayout(topics.prefix, topics.partitions, topics.replication_factor)
    kafka, timeout = config.kafka, config.runner.startup_timeout
    clients.probe(kafka, timeout)  # one clear line when the cluster is not there
    table = asyncio.run(
        _read(kafka, layout.status, f"{config.runner.group_id}.status-cli", timeout)
    )
    streams = {p.name: p.stream_of for p in config.pollers if p.stream_of is not None}
    connectors = {stream.connector for stream in streams.values()}
    known = {p.name for p in config.pollers} | set(table.pollers()) | connectors
    if poller is not None and poller not in known:
        raise ConfigError(
            f"unknown poller '{poller}' (known: {', '.join(sorted(known))})", "--poller"
        )
    session_timeout = config.runner.session_timeout
    if poller in connectors:  # --poller tracker: every stream of it
        every = table.view(None, now=clock(), session_timeout=session_timeout)
        rows = [r for r in every if r.poller in streams and streams[r.poller].connector == poller]
    else:
        rows = table.view(poller, now=clock(), session_timeout=session_timeout)
    if not rows:
        whose = "any poller" if poller is None else f"poller '{poller}'"
        err.write(f"watukuy-source: no status of {whose} in {layout.status} yet\n")
        return 0
    shown = render(
        rows, tty=out.isatty() if tty is None else tty, unicode=_unicode(out), streams=streams
    )
    out.write(shown)
    out.flush()
    return len(rows)


async def _read(kafka: Any, topic: str, group: str, startup_timeout: float) -> StatusTable:
    table = StatusTable()

    def apply(batch: list[Message]) -> None:
        for message in batch:
            try:
                table.apply(message.key, message.value)
            except StateCorrupted as exc:
                log.warning("%s[%d]@%d skipped: %s", topic, message.partition, message.offset, exc)

    reader = TopicReader(kafka, topic, group=group, apply=apply, timeout=startup_timeout)
    try:
        await reader.start()
    except MissingTopic:
        prefix = topic.removesuffix(".status")
        raise WatukuyError(
            f"topic '{topic}' does not exist: no runner has started with topics.prefix "
            f"'{prefix}' on this cluster"
        ) from None
    await reader.stop()
    return table


def _unicode(out: TextIO) -> bool:
    encoding = (getattr(out, "encoding", None) or "").lower().replace("-", "")
    return encoding == "utf8"


# -- the table (pure) -------------------------------------------------------------------------


def render(
    rows: Sequence[KeyStatus],
    *,
    tty: bool,
    unicode: bool = True,
    streams: Mapping[str, StreamOf] | None = None,
) -> str:
    """The table, aligned; then, one line each, why a key FAILED or why its owner leaves it
    UNASSIGNED (it waits for a newer release), from its ``last_error``. When a row is a
    stream of a connector (``streams``, by poller), the poller is shown as its connector and
    stream, a connector's streams together."""
    streams = {r.poller: streams[r.poller] for r in rows if streams and r.poller in streams}
    columns = STREAM_COLUMNS if streams else COLUMNS
    if streams:
        rows = sorted(rows, key=lambda r: (*_named(r.poller, streams), r.partition))
    cells = [list(columns)]
    for row in rows:
        named = list(_named(row.poller, streams)) if streams else [row.poller]
        cells.append(
            [
                *named,
                _partition(row.partition),
                row.state,
                row.owner or "-",
                "-" if row.lag is None else age_text(row.lag),
                row.circuit,
                _parked(row.parked),
                _backfill(row.backfill, tty=tty, unicode=unicode),
            ]
        )
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    ]
    for row in rows:
        if row.state in REASONED and row.last_error:
            lines.append(f"{row.key}: {row.last_error}")
    return "\n".join(lines) + "\n"


def _named(poller: str, streams: Mapping[str, StreamOf]) -> tuple[str, str]:
    stream = streams.get(poller)
    return (poller, "-") if stream is None else (stream.connector, stream.stream)


def _partition(key: str) -> str:
    return "''" if key == "" else key


def _parked(parked: Any) -> str:
    shown = [f"{kind}={count}" for kind, count in sorted(parked.items()) if count]
    return " ".join(shown) or "0"


def _backfill(progress: BackfillProgress | None, *, tty: bool, unicode: bool) -> str:
    if progress is None:
        return "-"
    parts = []
    if progress.pages is not None:
        parts.append(f"{progress.pages:,} pages")
    if progress.items is not None:
        parts.append(f"{progress.items:,} items")
    if progress.cursor is not None:
        parts.append(f"at {_cursor(progress.cursor)}")
    counts = ", ".join(parts) or "running"
    fraction = progress.fraction
    if fraction is None:
        return counts
    percent = f"{fraction * 100:.0f}%"
    if not tty:
        return f"{percent}, {counts}"
    return f"{_bar(fraction, unicode)} {percent} {counts}"


def _bar(fraction: float, unicode: bool) -> str:
    # Drawn here rather than with rich or tqdm: a static bar in a table cell is one line,
    # and the runner's package needs no terminal library for it.
    done = round(max(0.0, min(1.0, fraction)) * BAR_WIDTH)
    full, empty = ("█", "░") if unicode else ("#", ".")
    return f"[{full * done}{empty * (BAR_WIDTH - done)}]"


def _cursor(cursor: Any) -> str:
    text = cursor if isinstance(cursor, str) else json.dumps(cursor, default=str)
    return text if len(text) <= MAX_CURSOR else text[: MAX_CURSOR - 1] + "…"
