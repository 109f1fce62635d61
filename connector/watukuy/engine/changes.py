"""Which held keys may show something new: what a status round looks at, instead of every key.

A key is *touched* whenever what :meth:`~watukuy.engine.engine.Engine.inspect` shows of it
may have changed other than by the passing of time: it took a commit in, its due time was
set, its phase moved, it was let go. A watcher (:meth:`Engine.watch_keys`) takes the keys
touched since its last look, so a runner's status round costs what changed, not what is
held: looking at each of 10,000 idle keys every second was most of an idle runner's CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

__all__ = ["Follower", "KeyChanges", "Watchers"]

Marks = Callable[[Iterable[str]], dict[str, Hashable]]


class KeyChanges:
    """The keys touched since the last :meth:`take` (their text form, ``poller/partition``),
    and what their statuses show (:meth:`marks`)."""

    __slots__ = ("_backlogged", "_keys", "_marks")

    def __init__(
        self,
        keys: Iterable[str] = (),
        marks: Marks = lambda keys: {},
        backlogged: Callable[[], bool] = lambda: False,
    ) -> None:
        self._keys = set(keys)
        self._marks = marks
        self._backlogged = backlogged

    @property
    def backlogged(self) -> bool:
        """Whether the engine is still listing and taking in its keys (a start), or more keys
        are due than it polls at once (a start's first polls, a takeover's): a watcher whose
        work can wait (key statuses) waits for them."""
        return self._backlogged()

    def touch(self, key: str) -> None:
        self._keys.add(key)

    def again(self, keys: Iterable[str]) -> None:
        """Look at ``keys`` again next time (a round that could not finish with them)."""
        self._keys.update(keys)

    def take(self) -> set[str]:
        """The keys touched since the last call; the watcher starts afresh."""
        taken, self._keys = self._keys, set()
        return taken

    def marks(self, keys: Iterable[str]) -> dict[str, Hashable]:
        """Each of ``keys`` still held, with its
        :func:`~watukuy.engine.inspection.status_mark`: as long as it is equal, so is what a
        status shows of the key's inspection. A key not among them was let go."""
        return self._marks(keys)

    def __len__(self) -> int:
        return len(self._keys)


class Follower(Protocol):
    """Who hears of each touch as it happens (a :class:`KeyChanges` notes the key; the
    metrics' figures take the key's new figures in at once)."""

    def touch(self, key: str) -> None: ...


class Watchers:
    """Every watcher of one engine's keys: the roster touches a key here as it changes, after
    the change (a follower reads the key's new state)."""

    __slots__ = ("_watching",)

    def __init__(self) -> None:
        self._watching: list[Follower] = []

    def watch(
        self, held: Iterable[str], marks: Marks, backlogged: Callable[[], bool]
    ) -> KeyChanges:
        """A watcher of the keys touched from now on, holding ``held`` to begin with."""
        watcher = KeyChanges(held, marks, backlogged)
        self._watching.append(watcher)
        return watcher

    def follow(self, follower: Follower) -> None:
        """Tell ``follower`` of every touch from now on."""
        self._watching.append(follower)

    def touch(self, key: str) -> None:
        """What ``inspect()`` shows of ``key`` may have changed (or the key was let go)."""
        for watcher in self._watching:
            watcher.touch(key)
