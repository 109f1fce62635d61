"""What an operator reads: one handler for every ``watukuy.*`` logger, text or JSON lines.

- :func:`configure` installs the handler (``log.format``, ``log.level``) and the runner id.
- :func:`log_context` sets the fields of what the code around it is doing (``poller``,
  ``partition``, ``lane``, ``generation``) in a :mod:`contextvars` variable, so every record
  logged inside it carries them, however deep the call that logs. Each asyncio task has its
  own copy: two keys polled at once never mix their fields.
- :class:`ContextFilter` copies those fields onto each record; :class:`KeyRepeatFilter` lets a
  failing tenant's same warning through once per interval and counts the rest.

Messages never hold partition data or secrets (the engine's messages are built that way);
the fields added here are names, keys and numbers only.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TextIO

CONTEXT_FIELDS = ("poller", "partition", "lane", "generation")
"""What :func:`log_context` may set."""
FIELDS = ("poller", "partition", "lane", "runner", "generation", "error_kind")
"""The fields a line carries when they are known, in this order."""
FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")
REPEAT_INTERVAL = 60.0  # seconds: a tenant's same warning at most once per this
ROOT = "watukuy"
LIBRDKAFKA = "watukuy.librdkafka"

_EMPTY: Mapping[str, object] = MappingProxyType({})
_context: ContextVar[Mapping[str, object]] = ContextVar("watukuy_log_context", default=_EMPTY)
_runner: str | None = None  # one per process: threads (the Kafka thread) must see it too


class log_context:  # lower case: it reads as the function it replaced, ``with log_context(...)``
    """Records logged inside carry ``fields`` (``None`` values are left out), on top of the
    fields of an enclosing ``log_context``."""

    # A class, not a ``@contextmanager`` generator: every poll enters two of these, and the
    # generator's machinery was most of their cost (4% of an idle runner's samples).
    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: object) -> None:
        if not _CONTEXT_FIELDS.issuperset(fields):
            unknown = set(fields) - _CONTEXT_FIELDS
            raise TypeError(f"unknown log context field(s): {', '.join(sorted(unknown))}")
        self._fields = fields
        self._token: Token[Mapping[str, object]] | None = None

    def __enter__(self) -> None:
        merged = dict(_context.get())
        for name, value in self._fields.items():
            if value is not None:
                merged[name] = value
        self._token = _context.set(MappingProxyType(merged))

    def __exit__(self, *_: object) -> None:
        if self._token is not None:
            _context.reset(self._token)
            self._token = None


_CONTEXT_FIELDS = frozenset(CONTEXT_FIELDS)


def current_context() -> Mapping[str, object]:
    """The fields :func:`log_context` set here (the runner id is not among them)."""
    return _context.get()


def set_runner(runner_id: str | None) -> None:
    """The runner id every record of this process carries from now on."""
    global _runner
    _runner = runner_id


class ContextFilter(logging.Filter):
    """Copies the context fields and the runner id onto each record. A field passed with
    ``extra=`` wins over the context's."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in _context.get().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        if _runner is not None and not hasattr(record, "runner"):
            record.runner = _runner
        return True


class RepeatFilter(logging.Filter):
    """Lets the records of each :meth:`key` through at most once per ``period`` seconds; the
    next one shown after a quiet spell says how many were held back. A record whose key is
    ``None`` always goes through.

    Written here rather than taken from log-rate-limit: that library keys its streams by source
    line and reports skipped records on a second line, which breaks one-record-a-line logs.
    """

    def __init__(self, period: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.period = period
        self._clock = clock
        self._lock = threading.Lock()  # records come from the loop and the Kafka thread
        self._shown: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}

    def key(self, record: logging.LogRecord) -> Hashable | None:
        """What makes two records "the same"; ``None``: never held back."""
        return None

    def filter(self, record: logging.LogRecord) -> bool:
        key = self.key(record)
        if key is None:
            return True
        now = self._clock()
        with self._lock:
            last = self._shown.get(key)
            if last is not None and now - last < self.period:
                self._held[key] = self._held.get(key, 0) + 1
                return False
            self._forget(now)
            self._shown[key] = now
            held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} more like this not shown)"
            record.args = None
        return True

    def _forget(self, now: float) -> None:
        """Drop what is past its period, so the table stays small (keeps their held counts)."""
        if len(self._shown) < 256:
            return
        for key, shown in list(self._shown.items()):
            if now - shown >= self.period and key not in self._held:
                del self._shown[key]


class KeyRepeatFilter(RepeatFilter):
    """A failing tenant's repeated warnings and errors: the same logger and message template
    for the same poller and partition, at most once per period. Records of no poller (the
    runner's own) are never held back: they are rare, and each may be the one that matters.

    Needs :class:`ContextFilter` before it, which puts the poller and partition on the record.
    """

    def __init__(
        self, period: float = REPEAT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(period, clock)

    def key(self, record: logging.LogRecord) -> Hashable | None:
        poller = getattr(record, "poller", None)
        if record.levelno < logging.WARNING or poller is None:
            return None
        return (record.name, poller, getattr(record, "partition", None), str(record.msg))


def _iso(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class TextFormatter(logging.Formatter):
    """``2026-09-01T12:00:00.000Z WARNING watukuy.poll: message poller=... partition=...``"""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _iso(record.created)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = [f"{name}={_shown(getattr(record, name))}" for name in _present(record)]
        return " ".join([line, *fields])


def _present(record: logging.LogRecord) -> list[str]:
    return [name for name in FIELDS if getattr(record, name, None) is not None]


def _shown(value: object) -> str:
    text = str(value)
    if text and not any(c.isspace() or c in "\"'=" for c in text):
        return text
    return json.dumps(text)  # empty (an unpartitioned poller's key '') or spaced: quoted


def json_line_formatter() -> logging.Formatter:
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message``, then the fields
    that are known, and ``traceback`` for an exception. python-json-logger does the encoding
    (control characters, non-string values, exceptions); this only names the keys. (Imported
    here: only ``log.format: json`` needs it, and it costs a text runner's start 60 ms.)"""
    from pythonjsonlogger.json import JsonFormatter

    class JsonLineFormatter(JsonFormatter):
        def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
            return _iso(record.created)

    return JsonLineFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={
            "asctime": "time",
            "levelname": "level",
            "name": "logger",
            "exc_info": "traceback",
        },
        json_ensure_ascii=False,
    )


class _Stderr(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record comes, as ``logging.lastResort``
    does: the CLI's own one-line errors and the logs share one stream, in order."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current sys.stderr


def configure(
    format: str = "text",
    level: str = "info",
    runner_id: str | None = None,
    *,
    repeat_interval: float = REPEAT_INTERVAL,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Install the one handler (replacing one installed before) and return it.

    It sits on the root logger, so that a warning of a library (aiohttp, asyncio) comes out
    in the same format: a JSON log stays one object a line. ``level`` applies to ``watukuy.*``;
    other loggers keep Python's default (warnings and up). librdkafka's logs (``watukuy.
    librdkafka``) show errors only, unless ``level`` is debug. ``stream`` defaults to stderr.
    """
    if format not in FORMATS:
        raise ValueError(f"log format must be one of: {', '.join(FORMATS)}; got {format!r}")
    if level not in LEVELS:
        raise ValueError(f"log level must be one of: {', '.join(LEVELS)}; got {level!r}")
    handler: logging.Handler = _Stderr() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter() if format == "text" else json_line_formatter())
    handler.addFilter(ContextFilter())
    handler.addFilter(KeyRepeatFilter(repeat_interval))
    handler.set_name(ROOT)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == ROOT]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    numeric = logging.getLevelName(level.upper())
    logging.getLogger(ROOT).setLevel(numeric)
    logging.getLogger(LIBRDKAFKA).setLevel(logging.DEBUG if level == "debug" else logging.ERROR)
    set_runner(runner_id)
    return handler
