"""The roster of active keys: partitions refresh, restore from the store, due times, commits.

Added partitions are due at once with fresh state; removed ones are paused (an unfenced write)
and leave scheduling and ``inspect()``; a partition that returns resumes from its stored
cursor. A ``partitions`` callable that raises is logged and the previous list kept.

Every key held in memory goes through :mod:`watukuy.core.lifecycle`: restored, held (active
or paused by the user), then let go by :meth:`Roster.drop`, the one place a key leaves the
roster (removed from the listing, fenced, its connector stopped, or deleted). A runtime
object lives one hold; a key held again later gets a new runtime, starting at ``RESTORING``.
A poller's target (RUNNING, PAUSED, STOPPED) decides whether its keys are held and polled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from watukuy.core import schedule as schedules
from watukuy.core.arrivals import may_list_again
from watukuy.core.children import descendants
from watukuy.core.clock import Clock
from watukuy.core.errors import ConfigError, Fenced, Retriable, ShowsConfigOnly
from watukuy.core.keys import key_text
from watukuy.core.lifecycle import KeyPhase, Target, held_phase
from watukuy.core.observe import Observer
from watukuy.core.partitions import diff
from watukuy.core.poll import due_at, fresh_state
from watukuy.core.poller import Partition, Poller
from watukuy.core.redaction import failure_text
from watukuy.engine import commits
from watukuy.engine.changes import Watchers
from watukuy.engine.child_streams import ChildStreams
from watukuy.engine.due_times import KeyTimes
from watukuy.engine.keys import KeyLock, KeyRuntime
from watukuy.engine.listings import Listings, own_listing, sample, tell_owners
from watukuy.engine.snapshots import DEFAULT_BUDGET, Snapshots
from watukuy.logs import log_context
from watukuy.store.base import Command, KeyCommit, NewerRelease, Store

log = logging.getLogger("watukuy.partitions")

WAITING_LOG_EVERY = 60.0
"""Seconds between log lines about keys that wait for a newer release (one line, then a
count of the others): a rolling upgrade may find thousands of them at once."""


class KeyNotActive(ConfigError):
    """An operation names a key this instance does not hold now. From a caller, a mistake; for
    a command sent by another instance, often a moment early (the key's listing or activation
    is under way), so the engine tries it again for a while."""


class Roster:
    """The keys this instance holds, the pollers they belong to, their listings, targets
    and due times: the engine asks it rather than reaching into its tables."""

    def __init__(
        self,
        pollers: dict[str, Poller],
        store: Store,
        clock: Clock,
        child_streams: ChildStreams[Roster],
        on_keys_changed: Callable[[], None] = lambda: None,
        observer: Observer | None = None,
        snapshot_budget: int = DEFAULT_BUDGET,
    ) -> None:
        self._pollers = pollers
        self._children = child_streams
        self.observer = observer or Observer()
        # Called once the partition lists or the store's ownership may have changed.
        self._on_keys_changed = on_keys_changed
        self.store = store
        self.clock = clock
        self._keys: dict[str, KeyRuntime] = {}
        self.due = KeyTimes()
        """When each held key is next due (the roster schedules, the engine takes them)."""
        self._activation_pending = False
        self._leaving: dict[str, KeyLock] = {}
        """Keys let go while their poll or an operation on them was under way: the lock it
        holds (not the runtime, whose snapshot would stay in memory)."""
        self.listings = Listings(pollers)
        """What each poller listed last."""
        self._targets: dict[str, Target] = {}  # absent: RUNNING
        self._waiting_logged_at: float | None = None
        self._waiting_unlogged = 0
        self.snapshots = Snapshots(store, snapshot_budget)
        """Which held keys keep their snapshot in memory."""
        self.changes = Watchers()
        """Who watches the keys change (:mod:`.changes`): the roster touches them there."""

    # -- partitions ---------------------------------------------------------------------

    def listings_due(self) -> list[tuple[str, Poller]]:
        """The pollers holding keys whose ``partitions_refresh`` elapsed or that never listed."""
        now, due = self.clock.now(), []
        for name, poller in self._pollers.items():
            at = self.listings.of(name).refreshed_at
            if self.target(name).holds_keys and (
                at is None or now - at >= poller.partitions_refresh
            ):
                due.append((name, poller))
        return due

    async def refresh(self, name: str, *, force: bool) -> list[Partition]:
        """Evaluate ``partitions()`` and apply the difference. ``force``
        (``engine.partitions.list``) lets the error reach the caller; a scheduled refresh logs
        it and keeps the previous list."""
        with log_context(poller=name):
            return await self._refresh(name, force=force)

    async def _refresh(self, name: str, *, force: bool) -> list[Partition]:
        poller = self._pollers[name]
        table = self.listings.of(name)
        began = table.asked_again
        try:
            latest = await self._evaluate(poller)
        except Exception as exc:
            table.listing_ended(self.clock.now(), began)
            if force:
                raise
            # The listing may quote tenant data: what the previous list holds is taken out.
            data = [partition.data for partition in table.current.values()]
            trusted = isinstance(exc, ShowsConfigOnly)
            log.warning(
                "poller '%s': partitions() failed, keeping the previous %d partition(s): %s",
                name,
                len(table.current),
                failure_text(exc, data, trusted=trusted),
            )
            return list(table.current.values())
        if self._pollers.get(name) is not poller:
            return list(latest.values())  # removed or redefined while listing: not ours to apply
        changes = diff(table.current, latest)
        for key in changes.removed:
            await self._deactivate(poller, key)
        await self._children.pause_dormant(self, name, set(changes.removed))  # not held: not above
        for key in changes.added:
            if self.store.owns(name, key):  # the others belong to other instances
                await self._activate(poller, latest[key])
        for key in changes.kept:  # data may change between refreshes (rotated tokens)
            runtime = self._keys.get(key_text(name, key))
            if runtime is not None:
                runtime.partition = latest[key]
        table.current = latest
        now = self.clock.now()
        table.listing_ended(now, began)
        for child in descendants(self._pollers, name):  # they follow its tenants
            self.listings.of(child).list_again()
        if table.listed:
            within = poller.partitions_refresh
            table.arrivals = table.arrivals.listed(changes.added, changes.removed, now, within)
        table.listed = True
        self._on_keys_changed()
        if force and self.target(name).holds_keys:  # a stopped connector's owners hold nothing
            current = self.listings.of(name)  # as before: the table now, after the awaits
            await tell_owners(current, poller, self.store, self.clock.now())
        return list(latest.values())

    async def list_for_command(self, name: str, key: str) -> None:
        """Another instance sent a command for ``key`` of ``name``, which this listing lacks:
        it listed the key before this instance did (a tenant just added). List the poller
        again now (at most once per few seconds), so the key is held and the command applies
        without waiting for the next scheduled refresh."""
        table = self.listings.table(name)
        if table is None or key in table.current or not self.target(name).holds_keys:
            return
        if may_list_again(table.refreshed_at, self.clock.now()):
            log.info(
                "%s: named by another instance, not listed here yet: listing", key_text(name, key)
            )
            await self.refresh(name, force=False)

    async def _evaluate(self, poller: Poller) -> dict[str, Partition]:
        if poller.expires_keys:  # a child's or fan-out's keys: listed, and expired
            return await self._children.listing(self, poller)
        return await own_listing(poller)

    async def _activate(self, poller: Poller, partition: Partition) -> None:
        if self._still_leaving(key_text(poller.name, partition.key)):
            return
        with log_context(poller=poller.name, partition=partition.key):
            try:
                await self._restore(poller, partition)
            except NewerRelease as exc:
                self._wait(poller, partition, exc)
            except (Fenced, Retriable) as exc:
                # Ownership moved while it was loading, or the store is busy: the next pass over
                # ownership tries again if the key is still ours.
                log.info("%s: not activated now: %s", key_text(poller.name, partition.key), exc)
                self._activation_pending = True

    async def _restore(self, poller: Poller, partition: Partition) -> None:
        now = self.clock.now()
        # Without its snapshot: loaded when a page needs it (see .snapshots).
        stored = await self.store.load(poller.name, partition.key, snapshot=False)
        if stored is None:
            # Stored with its first poll: activating thousands of tenants costs no writes.
            runtime = KeyRuntime(poller, partition, fresh_state(poller, partition.key, now))
        else:
            runtime = KeyRuntime(poller, partition, stored.state, None, stored.parked)
            if not self._holds(poller):
                runtime.move(KeyPhase.STOPPED)  # stopped or replaced while it was loading
                return
            if runtime.state.paused == "removed":
                back = replace(
                    runtime.state.resumed(),
                    schedule=schedules.trigger(runtime.state.schedule, now),
                )
                await self.commit(runtime, KeyCommit(state=back, fenced=False))
        if runtime.state.circuit.probe_in_flight:  # the probe died with a previous run
            runtime.state = replace(runtime.state, circuit=runtime.state.circuit.on_cancel())
        if not self._holds(poller):
            runtime.move(KeyPhase.STOPPED)
            return
        if runtime.key in self._keys:
            return  # activated meanwhile (a listing and a move of ownership at once): held
        runtime.move(held_phase(runtime.state))
        self._keys[runtime.key] = runtime
        self.observer.key_gained(poller.name, partition.key)
        self.reschedule(runtime)

    def _still_leaving(self, key: str) -> bool:
        """Whether ``key`` was let go while a poll or an operation on it was under way, and
        that has not ended: held now, it would load the state from before that write lands
        (a connector redefined while a trigger of the key committed lost the trigger). The
        next pass over ownership holds it (:attr:`activation_pending`)."""
        lock = self._leaving.get(key)
        if lock is None:
            return False
        if lock.locked():
            self._activation_pending = True
            return True
        del self._leaving[key]
        return False

    def _wait(self, poller: Poller, partition: Partition, why: NewerRelease) -> None:
        """Show the key, waiting for a newer release: owned here but neither polled nor
        written (its newer value must survive), until ownership moves it to an instance that
        reads it. Its ``last_error`` says why; the state shown is not the stored one."""
        if not self._holds(poller):
            return
        now = self.clock.now()
        text = f"waits for a newer release of watukuy to read its stored state: {why}"
        shown = replace(fresh_state(poller, partition.key, now), last_error=text)
        runtime = KeyRuntime(poller, partition, shown)
        runtime.move(KeyPhase.WAITING_NEWER)
        self._keys[runtime.key] = runtime
        self.changes.touch(runtime.key)
        self.observer.key_gained(poller.name, partition.key)
        last = self._waiting_logged_at
        if last is None or now - last >= WAITING_LOG_EVERY:
            others = self._waiting_unlogged
            self._waiting_logged_at, self._waiting_unlogged = now, 0
            also = (
                f" ({others} other key(s) began waiting since the last such line)" if others else ""
            )
            log.warning("%s: %s; not polled here%s", runtime.key, text, also)
        else:
            self._waiting_unlogged += 1

    def _holds(self, poller: Poller) -> bool:
        """Whether keys of ``poller`` (this very definition) may be held now."""
        return self._pollers.get(poller.name) is poller and self.target(poller.name).holds_keys

    async def _deactivate(self, poller: Poller, key: str) -> None:
        with log_context(poller=poller.name, partition=key):
            runtime = self._keys.get(key_text(poller.name, key))
            if runtime is None:
                return
            if runtime.phase is KeyPhase.WAITING_NEWER:
                self.drop(runtime, KeyPhase.PAUSED_REMOVED)  # written by nobody but its reader
                return
            async with runtime.lock:
                if not runtime.held:
                    return  # let go meanwhile (fenced, stopped)
                self.drop(runtime, KeyPhase.PAUSED_REMOVED)
                if runtime.state.paused is None:
                    paused = runtime.state.paused_by("removed", self.clock.now())
                    try:
                        await self.store.commit([KeyCommit(state=paused, fenced=False)])
                    except (Fenced, Retriable) as exc:
                        log.info("%s: could not record the removal: %s", runtime.key, exc)

    async def sync_ownership(self) -> None:
        """Follow the store's ownership: drop keys that moved away, activate those that came.

        A dropped key is not written: its new owner holds it now. An arriving key is loaded
        from what the store restored, with the epoch the takeover bumped.
        """
        self._activation_pending = False
        self._on_keys_changed()
        self._leaving = {key: lock for key, lock in self._leaving.items() if lock.locked()}
        before = set(self._keys)
        for runtime in list(self._keys.values()):
            if not self.store.owns(runtime.poller.name, runtime.partition.key):
                self.drop(runtime, KeyPhase.FENCED, retry=False)
        for name in self.listings.names():
            await self.activate_listed(name)
            if self._pollers[name].parent is not None:  # its stored keys may have moved
                self.listings.of(name).list_again()
        if set(self._keys) != before:
            log.info(
                "now owning %d key(s)%s; gave up %d, took %d",
                len(self._keys),
                sample(self._keys),
                len(before - set(self._keys)),
                len(set(self._keys) - before),
            )

    async def activate_listed(self, name: str, only: list[str] | None = None) -> None:
        """Hold every listed key of ``name`` (or of ``only``: a child stream's keys just
        created) this instance owns and does not hold yet."""
        table = self.listings.table(name)
        if table is None or not self.target(name).holds_keys:
            return
        if table.refreshed_at is None and only is None:
            return
        poller = self._pollers[name]
        listed = table.current
        chosen = [(k, listed[k]) for k in only if k in listed] if only else list(listed.items())
        for key, partition in chosen:
            if key_text(name, key) not in self._keys and self.store.owns(name, key):
                await self._activate(poller, partition)

    def drop(self, runtime: KeyRuntime, phase: KeyPhase, *, retry: bool = True) -> None:
        """Let the key go: the one place a key leaves ``keys`` and scheduling.

        ``phase`` says why (the lifecycle table must allow it). Nothing is written here: the
        callers that must record something (a removal from the listing) do so themselves. A
        fenced key is looked at again at the next pass over ownership (``retry``): if it is
        still ours, it is restored with the epoch the store holds now.
        """
        runtime.move(phase)
        if runtime.lock.locked() and phase is not KeyPhase.DORMANT:  # a dormant child's poll
            self._leaving[runtime.key] = runtime.lock  # is done: its pages have landed
        if self._keys.get(runtime.key) is runtime:
            del self._keys[runtime.key]
            self.due.discard(runtime.key)
            self.changes.touch(runtime.key)
            self.observer.key_released(runtime.poller.name, runtime.partition.key, phase.value)
        if phase is KeyPhase.FENCED and retry:
            self._activation_pending = True

    # -- pollers and targets --------------------------------------------------------------

    def target(self, name: str) -> Target:
        return self._targets.get(name, Target.RUNNING)

    def set_target(self, name: str, target: Target) -> None:
        self._targets[name] = target

    def install(self, poller: Poller) -> None:
        """Add ``poller``, or replace the definition of that name (drop its keys first)."""
        self._pollers[poller.name] = poller
        self.listings.start(poller.name)

    def uninstall(self, name: str) -> None:
        """Forget ``name`` (drop its keys first); its stored state stays."""
        self._pollers.pop(name, None)
        self.listings.forget(name)
        self._targets.pop(name, None)

    def key_name(self, name: str, partition: str | None) -> str:
        poller = self.poller(name)
        if poller.partitioned and partition is None:
            raise ConfigError(f"poller '{name}' is partitioned; pass partition=...")
        if not poller.partitioned and partition not in (None, ""):
            raise ConfigError(f"poller '{name}' has no partitions; omit partition=", "partition")
        return partition or ""

    async def remove(self, name: str, key: str, command: str | None = None) -> None:
        """Delete every record of the key; it comes back fresh only if listed again."""
        self.poller(name)
        if not self.store.owns(name, key):
            await self.store.send_command(Command.issue("remove", name, key, {}, self.clock.now()))
            self.listings.unlist(name, key)
            return
        runtime = self._keys.get(key_text(name, key))
        if runtime is not None:
            async with runtime.lock:
                await self.store.remove(name, key, command)
                if runtime.held or runtime.phase is KeyPhase.WAITING_NEWER:
                    self.drop(runtime, KeyPhase.REMOVED)
        else:
            await self.store.remove(name, key, command)
        self.listings.unlist(name, key)

    # -- lookups ------------------------------------------------------------------------

    def definitions(self) -> dict[str, Poller]:
        """A copy of the pollers by name."""
        return dict(self._pollers)

    def defines(self, name: str) -> bool:
        return name in self._pollers

    def runtime_of(self, key: str) -> KeyRuntime | None:
        """The runtime of the held key whose text is ``key``, if this instance holds it."""
        return self._keys.get(key)

    def still_holds(self, runtime: KeyRuntime) -> bool:
        """Whether ``runtime`` is still the one held for its key (not let go meanwhile)."""
        return self._keys.get(runtime.key) is runtime

    def held(self, name: str | None = None) -> list[KeyRuntime]:
        """The held keys' runtimes (of the poller ``name``, or all), in key order."""
        return [
            self._keys[key]
            for key in sorted(self._keys)
            if name is None or self._keys[key].poller.name == name
        ]

    def next_refresh_at(self, now: float) -> float | None:
        """When the next listing is due, among the pollers whose keys are held."""
        return min(
            (
                (refreshed_at or now) + self._pollers[name].partitions_refresh
                for name, refreshed_at in self.listings.refreshed().items()
                if self.target(name).holds_keys  # a stopped poller is not refreshed
            ),
            default=None,
        )

    @property
    def activation_pending(self) -> bool:
        """Whether a key could not be activated (or was fenced) and ownership needs a pass."""
        return self._activation_pending

    def keys_changed(self) -> None:
        """Tell the engine the partition lists or the store's ownership may have changed."""
        self._on_keys_changed()

    def poller(self, name: str) -> Poller:
        try:
            return self._pollers[name]
        except KeyError:
            raise ConfigError(f"unknown poller '{name}'", "poller") from None

    async def resolve(self, name: str, partition: str | None) -> KeyRuntime:
        """The active key an operation names; ``ConfigError`` when it names none."""
        key = self.key_name(name, partition)
        if self.listings.of(name).refreshed_at is None:
            await self.refresh(name, force=False)
        runtime = self._keys.get(key_text(name, key))
        if runtime is None:  # a dormant on_change child is held again for the operation
            await self._children.wake(self, self._pollers[name], key)
            runtime = self._keys.get(key_text(name, key))
        if runtime is None:
            raise KeyNotActive(f"poller '{name}' has no active partition {key!r}", "partition")
        commits.refuse_waiting(runtime)
        return runtime

    def partition_named(self, name: str, key: str) -> Partition | None:
        """The held key's partition (with its data); ``key`` is the seed's partition key."""
        runtime = self._keys.get(key_text(name, key))
        return None if runtime is None else runtime.partition

    # -- commits and due times ------------------------------------------------------------

    async def commit(self, runtime: KeyRuntime, commit: KeyCommit) -> None:
        """Commit one step of a key; a key another owner fenced off is let go here. Until the
        key takes it in (rescheduled), what is said served stays before its due time."""
        with self.due.writing(commit.state.schedule.next_due):
            await commits.send(self, runtime, commit)
            commits.take_in(self, runtime, commit)

    def reschedule(self, runtime: KeyRuntime) -> None:
        at = due_at(runtime.state, self.clock.now())
        if not self.target(runtime.poller.name).polls or runtime.phase is KeyPhase.WAITING_NEWER:
            at = None  # a paused connector keeps its keys but polls none
        self.due.schedule(runtime.key, at)
        self.changes.touch(runtime.key)
