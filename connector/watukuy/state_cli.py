"""``watukuy-source state info|wipe``: this runner's local state store (``runner.state.dir``).

``info`` reads the store read-only (so it works while the runner runs) and prints its path,
its size on disk and, per Kafka partition it holds, the keys (state records), the records
(state, items and parked), the offset it reflects of each co-partitioned topic, how long ago it
was last written, and the lag: how many offsets each topic gained past what the store holds,
from a read_committed consumer's end offsets. When Kafka cannot be reached within
``runner.startup.timeout`` (at most 5 s) it says the lag is unknown and still exits 0.

``wipe`` deletes the store, or only the given Kafka partitions of it; the runner rebuilds what
is gone from the topics at its next start. It refuses (exit 2) while a runner has the store
open: it takes the store's lock the way a runner does, and a runner's lock fails it.

Values that came from a ``${...}`` reference are shown ``[redacted]``, in the path too
(``runner.id: ${env:POD_NAME}``), as ``validate`` shows them.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from watukuy.config import RunnerConfig
from watukuy.core.durations import age_text
from watukuy.core.errors import ConfigError, WatukuyError
from watukuy.store.kafka import clients
from watukuy.store.kafka.local import LocalState, PartitionInfo, StoreInfo, state_path
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["LAG_TIMEOUT", "Ends", "StoreReport", "info", "kafka_ends", "render", "wipe"]

LAG_TIMEOUT = 5.0
"""At most this long (and at most ``runner.startup.timeout``) to read the topics' ends."""
REDACTED = "[redacted]"

Ends = Callable[[Mapping[str, Any], Sequence[tuple[str, int]], float], dict[tuple[str, int], int]]
"""Reads each topic-partition's end offset (read_committed); raises when Kafka is not there."""


@dataclass
class StoreReport:
    """What ``state info`` shows, as ``--format json`` prints it."""

    path: str
    exists: bool
    bytes_on_disk: int = 0
    partitions: list[dict[str, Any]] = field(default_factory=list)
    lag_known: bool = False
    lag_error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "exists": self.exists,
            "bytes_on_disk": self.bytes_on_disk,
            "lag_known": self.lag_known,
            "lag_error": self.lag_error,
            "partitions": self.partitions,
        }


# -- where the store is -------------------------------------------------------------------------


def _layout(config: RunnerConfig) -> TopicLayout:
    topics = config.topics
    return TopicLayout(topics.prefix, topics.partitions, topics.replication_factor)


def store_path(config: RunnerConfig) -> tuple[Path, str]:
    """The store's path, and how it may be shown (a segment from a reference redacted).

    ``ConfigError`` on ``runner.state.dir`` when it is not set: there is no store."""
    runner = config.runner
    if runner.state_dir is None:
        raise ConfigError(
            "is not set: this runner keeps its state in memory only and has no local state "
            "store (set runner.state.dir to give it one)",
            "runner.state.dir",
        )
    path = state_path(runner.state_dir, config.topics.prefix, runner.id)
    hidden = runner.secret_fields
    shown = state_path(
        REDACTED if "state_dir" in hidden else runner.state_dir,
        REDACTED if "prefix" in config.topics.secret_fields else config.topics.prefix,
        REDACTED if "id" in hidden else runner.id,
    )
    return path, str(shown)


# -- info -----------------------------------------------------------------------------------------


def info(
    config: RunnerConfig,
    *,
    fmt: str = "text",
    out: TextIO | None = None,
    err: TextIO | None = None,
    clock: Callable[[], float] = time.time,
    ends: Ends | None = None,
) -> StoreReport:
    """Print what the store holds and how far behind the topics it is; return it.

    ``out`` and ``err``: stdout and stderr as they are at the call."""
    out, err = out or sys.stdout, err or sys.stderr
    path, shown = store_path(config)
    report = StoreReport(shown, exists=path.exists())
    if report.exists:
        read, keys = _read(path, _layout(config))
        report.bytes_on_disk = read.bytes_on_disk
        now_ms = int(clock() * 1000)
        report.partitions = [
            _partition(p, keys[p.kafka_partition], now_ms) for p in read.partitions
        ]
        _add_lag(report, config, ends or kafka_ends)
    if fmt == "json":
        out.write(json.dumps(report.as_json(), indent=2) + "\n")
    else:
        out.write(render(report))
        if not report.exists:
            err.write(
                f"watukuy-source: no local state store at {shown} yet: the runner has not run "
                "with this runner.state.dir, or it was wiped (it is built at the next start)\n"
            )
        elif report.lag_error is not None:
            err.write(f"watukuy-source: lag unknown: {report.lag_error}\n")
    out.flush()
    return report


def _read(path: Path, layout: TopicLayout) -> tuple[StoreInfo, dict[int, int]]:
    """What the store holds, and its keys (state records) per Kafka partition."""
    try:
        local = LocalState.inspect(path, layout)
    except Exception as exc:  # rocksdict raises plain exceptions
        raise WatukuyError(
            f"the local state store at {path} cannot be read ({' '.join(str(exc).split())}); "
            "`watukuy-source state wipe` deletes it, the runner rebuilds it from the topics"
        ) from exc
    try:
        found = local.info()
        keys = {p.kafka_partition: p.by_topic.get(layout.state, 0) for p in found.partitions}
    finally:
        local.close()
    return found, keys


def _partition(found: PartitionInfo, keys: int, now_ms: int) -> dict[str, Any]:
    written = found.written_ms
    return {
        "partition": found.kafka_partition,
        "keys": keys,
        "records": found.records,
        "offsets": dict(found.offsets),
        "ends": None,
        "lag": None,
        "written_ms": written or None,
        "age_seconds": None if not written else max(0.0, (now_ms - written) / 1000),
    }


def _add_lag(report: StoreReport, config: RunnerConfig, ends: Ends) -> None:
    wanted = [(t, p["partition"]) for p in report.partitions for t in sorted(p["offsets"])]
    if not wanted:
        report.lag_known = True
        return
    timeout = min(LAG_TIMEOUT, config.runner.startup_timeout)
    try:
        found = ends(config.kafka, wanted, timeout)
    except WatukuyError as exc:
        report.lag_error = str(exc)
        return
    for partition in report.partitions:
        number = partition["partition"]
        partition["ends"] = {t: found[(t, number)] for t in partition["offsets"]}
        partition["lag"] = {
            t: max(0, found[(t, number)] - offset) for t, offset in partition["offsets"].items()
        }
    report.lag_known = True


def kafka_ends(
    kafka: Mapping[str, Any], wanted: Sequence[tuple[str, int]], timeout: float
) -> dict[tuple[str, int], int]:
    """Each topic-partition's end offset as a read_committed consumer sees it (the last stable
    offset: what a restore reads up to). :class:`WatukuyError` when Kafka does not answer."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(clients.tail_config(kafka, group="watukuy.state-cli"))
    out: dict[tuple[str, int], int] = {}
    try:
        for topic, partition in wanted:
            where = TopicPartition(topic, partition)
            _, end = consumer.get_watermark_offsets(where, timeout=timeout, cached=False)
            out[(topic, partition)] = int(end)
    except KafkaException as exc:
        raise clients.translated(exc, kafka, timeout, "reading end offsets") from exc
    finally:
        consumer.close()
    return out


# -- the text form (pure) -------------------------------------------------------------------------

COLUMNS = ("PARTITION", "KEYS", "RECORDS", "STATE", "ITEMS", "PARKED", "LAG", "LAST WRITE")


def render(report: StoreReport) -> str:
    """The store's path and size, then one line per Kafka partition: its keys and records, the
    stored offset of each topic (``offset+lag`` when the topic has more), the total lag
    (``?``: unknown) and the age of the last write."""
    head = f"local state store {report.path}"
    if not report.exists:
        return f"{head}: none\n"
    lines = [head, f"size on disk: {_size(report.bytes_on_disk)}"]
    if not report.partitions:
        return "\n".join([*lines, "no partition stored"]) + "\n"
    cells = [list(COLUMNS)]
    for row in report.partitions:
        topics = sorted(row["offsets"], key=_topic_order)
        lag = row["lag"]
        cells.append(
            [
                str(row["partition"]),
                f"{row['keys']:,}",
                f"{row['records']:,}",
                *(_offset(row, topic) for topic in topics),
                "?" if lag is None else f"{sum(lag.values()):,}",
                "-" if row["age_seconds"] is None else f"{age_text(row['age_seconds'])} ago",
            ]
        )
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    ]
    return "\n".join(lines) + "\n"


def _topic_order(topic: str) -> int:
    suffix = topic.rpartition(".")[2]
    return {"state": 0, "items": 1, "parked": 2}.get(suffix, 3)


def _offset(row: Mapping[str, Any], topic: str) -> str:
    offset = row["offsets"][topic]
    lag = (row["lag"] or {}).get(topic, 0)
    return f"{offset:,}+{lag:,}" if lag else f"{offset:,}"


def _size(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit} ({size:,} bytes)"
    return f"{size:,} bytes"


# -- wipe -----------------------------------------------------------------------------------------


def wipe(
    config: RunnerConfig, partitions: Iterable[int] | None = None, *, err: TextIO | None = None
) -> bool:
    """Delete the store, or only ``partitions`` of it; ``False``: there was none.

    ``ConfigError`` (exit 2) while a runner has it open, or for a partition the topics do not
    have."""
    err = err or sys.stderr
    path, shown = store_path(config)
    chosen = None if partitions is None else sorted(set(partitions))
    count = config.topics.partitions
    for number in chosen or ():
        if not 0 <= number < count:
            raise ConfigError(
                f"{number} is not a partition of the topics (topics.partitions is {count})",
                "--partition",
            )
    if not path.exists():
        err.write(f"watukuy-source: no local state store at {shown}: nothing to wipe\n")
        return False
    local = LocalState.for_wipe(path, _layout(config), shown)
    if chosen is None:
        if local is not None:
            local.close()
        shutil.rmtree(path)
        err.write(
            f"watukuy-source: wiped the local state store at {shown}; the runner rebuilds it "
            "from the topics at its next start\n"
        )
        return True
    if local is None:
        raise WatukuyError(
            f"the local state store at {shown} cannot be opened: wipe it whole "
            "(`watukuy-source state wipe` without --partition)"
        )
    try:
        for number in chosen:
            local.wipe(number)
    finally:
        local.close()
    listed = ", ".join(str(n) for n in chosen)
    err.write(
        f"watukuy-source: wiped partition(s) {listed} of the local state store at {shown}; "
        "the runner rebuilds them from the topics at its next start\n"
    )
    return True
