"""Which held keys may show something new: what a status round looks at, instead of every key.

A key is *touched* whenever what :meth:`~watukuy.engine.engine.Engine.inspect` shows of it
may have changed other than by the passing of time: it took a commit in, its due time was
set, its phase moved, it was let go. A watcher (:meth:`Engine.watch_keys`) takes the keys
touched since its last look, so a runner's status round costs what changed, not what is
held: looking at each of 10,000 idle keys every second was most of an idle runner's CPU.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["KeyChanges"]


class KeyChanges:
    """The keys touched since the last :meth:`take` (their text form, ``poller/partition``)."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._keys = set(keys)

    def touch(self, key: str) -> None:
        self._keys.add(key)

    def again(self, keys: Iterable[str]) -> None:
        """Look at ``keys`` again next time (a round that could not finish with them)."""
        self._keys.update(keys)

    def take(self) -> set[str]:
        """The keys touched since the last call; the watcher starts afresh."""
        taken, self._keys = self._keys, set()
        return taken

    def __len__(self) -> int:
        return len(self._keys)
