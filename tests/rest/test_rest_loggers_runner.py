"""The runner's side of ``/admin/loggers``: real Python loggers set and shown in Connect's
terms, cluster scope written to ``<prefix>.configs`` and applied from it, and the record it
writes there."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rest.support import runner_control
from watukuy.control.configrecords import decode_record, encode_logger
from watukuy.control.loggers import LoggerLevels, follow_cluster_levels
from watukuy.core.errors import ConfigError, StateCorrupted
from watukuy.rest.errors import NotFound

NOW = 1_767_225_600.25


class StubConfigs:
    """What the loggers use of ``ConfigTopic``: the levels written and read, and listeners."""

    def __init__(self, read: list[tuple[str, str]] | None = None) -> None:
        self.written: list[tuple[str, str]] = []
        self.read = list(read or [])
        self.listeners: list[object] = []

    async def put_logger(self, name: str, level: str) -> None:
        self.written.append((name, level))

    def loggers(self) -> list[tuple[str, str]]:
        return list(self.read)

    def listen_loggers(self, listener: object) -> None:
        self.listeners.append(listener)


@pytest.fixture
def base() -> Iterator[str]:
    """A logger tree of its own under ``watukuy`` (the runner's hierarchy), its levels unset
    afterwards (Python keeps every logger made; the names are never used again)."""
    name = f"watukuy.kip495.t{uuid.uuid4().hex[:8]}"
    yield name
    for each in list(logging.Logger.manager.loggerDict):
        if each == name or each.startswith(f"{name}."):
            logging.getLogger(each).setLevel(logging.NOTSET)


async def test_worker_scope_sets_python_loggers_below_the_one_named(
    base: str, tmp_path: Path
) -> None:
    logging.getLogger(base).setLevel(logging.WARNING)
    child = logging.getLogger(f"{base}.child")
    child.setLevel(logging.ERROR)  # its own level: set too, or it would not follow
    inheriting = logging.getLogger(f"{base}.inherits")
    control = runner_control(None, tmp_path, loggers=LoggerLevels(clock=lambda: NOW))

    changed = await control.loggers.set_level(base, "DEBUG", "worker")

    assert changed == [base, f"{base}.child", f"{base}.inherits"]
    assert child.isEnabledFor(logging.DEBUG) and inheriting.isEnabledFor(logging.DEBUG)
    assert inheriting.level == logging.NOTSET  # already DEBUG through its parent: left as is
    stamp = round(NOW * 1000)
    child_level = await control.loggers.level(f"{base}.child")
    assert child_level == {"level": "DEBUG", "last_modified": stamp}
    listed = await control.loggers.levels()
    assert listed[base] == {"level": "DEBUG", "last_modified": stamp}
    assert listed[f"{base}.inherits"] == {"level": "DEBUG", "last_modified": None}
    assert listed["root"]["level"] in {"OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"}


async def test_a_logger_without_a_level_of_its_own_is_not_found(base: str, tmp_path: Path) -> None:
    logging.getLogger(f"{base}.quiet")
    control = runner_control(None, tmp_path, loggers=LoggerLevels())
    with pytest.raises(NotFound):
        await control.loggers.level(f"{base}.quiet")
    with pytest.raises(NotFound):
        await control.loggers.level("never.made.anywhere")


async def test_cluster_scope_writes_the_configs_topic_and_changes_nothing_itself(
    base: str, tmp_path: Path
) -> None:
    configs = StubConfigs()
    logging.getLogger(base).setLevel(logging.WARNING)
    control = runner_control(None, tmp_path, configs=configs, loggers=LoggerLevels())

    assert await control.loggers.set_level(base, "trace", "cluster") == []

    assert configs.written == [(base, "TRACE")]
    assert logging.getLogger(base).level == logging.WARNING  # applied once read back


async def test_cluster_levels_apply_in_the_order_written_then_as_they_come(base: str) -> None:
    child = logging.getLogger(f"{base}.child")
    configs = StubConfigs(read=[(f"{base}.child", "DEBUG"), (base, "ERROR")])
    follow_cluster_levels(configs, LoggerLevels())  # type: ignore[arg-type]
    assert child.getEffectiveLevel() == logging.ERROR  # the later write to the parent wins

    (listener,) = configs.listeners
    listener(f"{base}.child", "INFO")  # type: ignore[operator]
    assert child.getEffectiveLevel() == logging.INFO


def test_the_record_holds_the_level_alone() -> None:
    record = decode_record(b"logger/watukuy.engine", encode_logger("watukuy.engine", "debug"))
    assert record is not None and record.kind == "logger" and record.name == "watukuy.engine"
    assert record.value == {"format_version": 1, "logger": "watukuy.engine", "level": "DEBUG"}
    with pytest.raises(StateCorrupted):
        decode_record(b"logger/x", b'{"format_version": 1, "logger": "x", "level": "LOUD"}')
    with pytest.raises(ConfigError):
        encode_logger("a b", "DEBUG")
