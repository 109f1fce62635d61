"""KIP-495's log levels at run time: this process's Python loggers, shown and set in Kafka
Connect's terms, for one instance (``worker`` scope) or every one (``cluster`` scope, through
``<prefix>.configs``).

As in Connect, a change sets the named logger and every existing logger below it, and each
instance remembers when it last changed a logger (``last_modified``); a logger whose level
was already the one asked for is left as it was. Unlike Connect, which ignores cluster-scoped
levels written before a worker started, an instance applies every one it reads at start: a
runner started after ``PUT /admin/loggers/watukuy?scope=cluster`` logs like the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from watukuy.control.configs import ConfigTopic
from watukuy.core.loglevels import LEVELS, ROOT, affected, check_level, level_name
from watukuy.rest.errors import NotFound
from watukuy.rest.port import LoggerLevel, LoggerScope

__all__ = ["HIERARCHY", "LoggerLevels", "RunnerLoggers", "follow_cluster_levels"]

log = logging.getLogger("watukuy.control")

HIERARCHY = "watukuy"
"""The loggers listed whenever their level is set (the runner's own); others are listed once
set through the API."""


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def _existing() -> list[str]:
    """The loggers this process has made (placeholders of the dotted tree are not loggers)."""
    loggers = list(logging.Logger.manager.loggerDict.items())
    return [name for name, found in loggers if isinstance(found, logging.Logger)]


def _ours(name: str) -> bool:
    return name == HIERARCHY or name.startswith(f"{HIERARCHY}.")


class LoggerLevels:
    """This process's loggers as KIP-495 shows them; ``clock`` gives epoch seconds."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._modified: dict[str, int] = {}
        self._set: set[str] = set()  # every logger a change named or reached, changed or not

    def levels(self) -> dict[str, LoggerLevel]:
        """``root``, the runner's loggers that have a level of their own and the loggers set
        through the API, by name."""
        names = {ROOT, *self._set}
        names.update(n for n in _existing() if _ours(n) and _logger(n).level != logging.NOTSET)
        return {name: self._entry(name) for name in sorted(names)}

    def level(self, name: str) -> LoggerLevel | None:
        """One logger of :meth:`levels`; ``None`` for any other."""
        return self.levels().get(name)

    def set(self, name: str, level: str) -> list[str]:
        """Set ``name`` and the existing loggers below it to ``level`` (Connect's name; a
        :class:`ConfigError` naming ``level`` otherwise); return their names, sorted."""
        number = LEVELS[check_level(level)]
        names = affected(name, _existing())
        self._set.update(names)  # listed from now on, as its answer named them
        now = round(self._clock() * 1000)
        # The named logger first: one below it that inherits its level then already has the
        # new one, and keeps inheriting rather than getting a level of its own.
        for each in [name, *(n for n in names if n != name)]:
            logger = _logger(each)
            if logger.getEffectiveLevel() != number:
                logger.setLevel(number)
                self._modified[each] = now
        return names

    def _entry(self, name: str) -> LoggerLevel:
        level = level_name(_logger(name).getEffectiveLevel())
        return {"level": level, "last_modified": self._modified.get(name)}


class RunnerLoggers:
    """The runner's :class:`~watukuy.rest.port.LoggerControl`: ``worker`` scope sets
    :class:`LoggerLevels` here, ``cluster`` scope writes ``<prefix>.configs``, which every
    instance (this one included, before the write returns) applies through
    :func:`follow_cluster_levels`."""

    def __init__(self, levels: LoggerLevels, configs: ConfigTopic) -> None:
        self._levels = levels
        self._configs = configs

    async def levels(self) -> dict[str, LoggerLevel]:
        return self._levels.levels()

    async def level(self, name: str) -> LoggerLevel:
        found = self._levels.level(name)
        if found is None:
            raise NotFound(f"logger {name} has no level set here")
        return found

    async def set_level(self, name: str, level: str, scope: LoggerScope) -> list[str]:
        level = check_level(level)
        if scope == "cluster":
            await self._configs.put_logger(name, level)
            return []
        return self._levels.set(name, level)


def follow_cluster_levels(configs: ConfigTopic, levels: LoggerLevels) -> None:
    """Apply the cluster-scoped levels ``configs`` (started) has read, in the order written,
    then each one it reads from now on."""
    configs.listen_loggers(lambda name, level: _apply(levels, name, level))
    for name, level in configs.loggers():
        _apply(levels, name, level)


def _apply(levels: LoggerLevels, name: str, level: str) -> None:
    changed = levels.set(name, level)  # the level was checked when the record was read
    log.info("log level of '%s' set to %s for the cluster (%d loggers)", name, level, len(changed))
