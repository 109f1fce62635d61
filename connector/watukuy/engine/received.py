"""Commands sent to this instance's keys (by other instances, REST, the CLI, and a parent's
commits to its children), applied as :meth:`Engine.run` finds them in the store.

Each key's commands apply one after the other, in the order they came; different keys' apply
at once. Applying one waits for its commit, so one at a time made a runner apply a few a
second (a Kafka transaction each), far below what a parent changing 10,000 items a minute
sends its ``on_change`` children; at once, the store's committer batches them into its
transactions. A command whose key is not held yet (a moment early) is tried again for a while,
and its key's later commands wait behind it: a ``resume`` applied before the ``pause`` sent
ahead of it would leave the key paused.

``run()`` applies each pass's commands in a task of its own (:class:`Received`): applying one
waits for its key's lock, which a poll holds until it ends, and a ``pause`` for a key whose
poll waited for a budget's token kept ``run()`` from starting any other key's poll until that
fetch timed out (60 s). A key whose commands are still being applied takes its next ones in
a later pass, so each key's commands still apply in the order they came.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from watukuy.core.commands import Command
from watukuy.core.errors import ConfigError, Conflict, Fenced, Retriable
from watukuy.engine.roster import KeyNotActive

log = logging.getLogger("watukuy.engine")

COMMAND_RETRY = 1.0
"""Seconds before a command from another instance whose key is not held yet is tried again."""
COMMAND_PATIENCE = 60.0
"""How long such a command is tried; after that it stays in the state topic, where the key's
next owner (or this one after a restart) reads it again."""

AT_ONCE = 256
"""Keys whose commands apply at the same time, at most."""

Waiting = list[tuple[float, float, Command]]
"""Commands to try again: (when, first tried, command)."""

__all__ = ["COMMAND_PATIENCE", "COMMAND_RETRY", "Received", "Waiting", "apply_all"]


class Received:
    """The commands taken from the store and not applied yet, and the keys being applied."""

    def __init__(
        self, apply: Callable[[Command], Awaitable[None]], wake: Callable[[], None] = lambda: None
    ) -> None:
        """``wake``: told when commands held back for a key being applied may apply now."""
        self._apply = apply
        self._wake = wake
        self._waiting: Waiting = []
        self._applying: set[str] = set()

    def due(self, taken: list[Command], now: float) -> list[tuple[float, Command]]:
        """The commands to apply now (first tried, command): those waiting whose time came,
        then ``taken``; those of a key still being applied wait for the next pass, and so do
        those behind a command of their key that waits (to be tried again)."""
        waiting, self._waiting = self._waiting, []
        due: list[tuple[float, Command]] = []
        behind = self._applying.copy()  # keys whose next commands wait, in order
        for at, since, command in [*waiting, *((now, now, command) for command in taken)]:
            if at > now or command.key in behind:
                self._waiting.append((at, since, command))
                behind.add(command.key)
            else:
                due.append((since, command))
        return due

    async def apply(self, due: list[tuple[float, Command]], now: float) -> None:
        """Apply ``due`` (see :func:`apply_all`); what is to be tried again waits here."""
        keys = {command.key for _, command in due}
        self._applying |= keys
        try:
            retry = await apply_all(self._apply, due, now)
        finally:
            self._applying -= keys
            if any(command.key in keys for _, _, command in self._waiting):
                self._wake()  # held back meanwhile: the pass after applies them, not a later one
        # Before the list as it is now (due() replaces it meanwhile): a key's commands held
        # back while these applied came after them.
        self._waiting[:0] = retry


async def apply_all(
    apply: Callable[[Command], Awaitable[None]],
    due: list[tuple[float, Command]],
    now: float,
) -> Waiting:
    """Apply ``due`` (first tried, command), each key's in order, keys at once; the commands
    to try again later."""
    if not due:
        return []
    by_key: dict[str, list[tuple[float, Command]]] = {}
    for since, command in due:
        by_key.setdefault(command.key, []).append((since, command))
    retry: Waiting = []
    slots = asyncio.Semaphore(AT_ONCE)

    async def one_key(commands: list[tuple[float, Command]]) -> None:
        async with slots:
            for at, (since, command) in enumerate(commands):
                if not await _apply(apply, since, command, now, retry):
                    # Its later commands wait behind it, in order, and are tried with it.
                    retry.extend((now + COMMAND_RETRY, *later) for later in commands[at + 1 :])
                    return

    if len(by_key) == 1:
        await one_key(next(iter(by_key.values())))
        return retry
    async with asyncio.TaskGroup() as group:
        for commands in by_key.values():
            group.create_task(one_key(commands))
    return retry


async def _apply(
    apply: Callable[[Command], Awaitable[None]],
    since: float,
    command: Command,
    now: float,
    retry: Waiting,
) -> bool:
    """Apply one command; ``False`` if it waits to be tried again."""
    try:
        await apply(command)
    except (KeyNotActive, Retriable) as exc:
        # Answered 2xx where it was sent: a moment early is no reason to lose it.
        if now - since < COMMAND_PATIENCE:
            retry.append((now + COMMAND_RETRY, since, command))
            return False
        log.warning(
            "%s: command %s %s not applied in %gs, left for the key's next owner: %s",
            command.key,
            command.op,
            command.id,
            COMMAND_PATIENCE,
            exc,
        )
    except (ConfigError, Conflict) as exc:
        log.warning("%s: command %s %s not applied: %s", command.key, command.op, command.id, exc)
    except Fenced:
        log.info("%s: command %s moved with its key", command.key, command.id)
    return True
