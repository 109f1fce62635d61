"""Child streams in the engine: a child poller's keys, and the commands its parent sends.

A child poller lists no partitions of its own: its listing is the keys the store holds for it
(restored, or created by an ``adopt``) whose tenant its root poller lists now. Each carries the
tenant's live data and its ancestors' item keys (``Partition.parents``). A key whose tenant is
no longer listed leaves the listing, so it is paused as a removed tenant is (grandchildren
too), and resumes when the tenant comes back.

``adopt`` and ``pause_child`` (sent by a parent's commit, :mod:`watukuy.core.children`) are
applied by the child key's owner here: ``adopt`` of a key never stored creates it, due at once;
of a live key changes nothing; of a key its parent paused resumes it. ``pause_child`` of a key
never stored only takes the command away. A child key paused by its parent sends
``pause_child`` on to its own children, and ``resume_child`` when it resumes (which, unlike
``adopt``, never creates a key). Each is applied in one commit that also takes its command
away and writes what it sends on, so a command handed over again (a restart, a move) finds
its work done.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from watukuy.core.children import ancestry, cascade, descendants, expired, split_child
from watukuy.core.commands import Command
from watukuy.core.errors import ConfigError, Conflict, Fenced, NewerRelease, Retriable
from watukuy.core.keys import key_text
from watukuy.core.lifecycle import KeyPhase
from watukuy.core.onchange import dormant, is_on_change
from watukuy.core.operations import KeyView, key_operation
from watukuy.core.poll import fresh_state
from watukuy.core.poller import Partition, Poller
from watukuy.engine.listings import own_listing
from watukuy.store.base import KeyCommit

if TYPE_CHECKING:
    from watukuy.engine.keys import KeyRuntime
    from watukuy.engine.roster import Roster

log = logging.getLogger("watukuy.children")

EXPIRED_PER_REFRESH = 1000
"""At most this many expired child keys are deleted by one refresh of their poller."""

_LISTING: weakref.WeakKeyDictionary[Roster, asyncio.Lock] = weakref.WeakKeyDictionary()
"""Per roster: held while a command's key makes its root poller list (:func:`_tenant_of`)."""

CHILD_OPERATIONS = frozenset({"adopt", "pause_child", "resume_child"})
"""The operations only a parent's commit sends (``resume_child``: a child's resumption)."""

__all__ = [
    "CHILD_OPERATIONS",
    "check_parents",
    "child_listing",
    "pause_dormant",
    "received",
    "rest",
    "wake",
]


def check_parents(pollers: Mapping[str, Poller]) -> None:
    """``ConfigError`` if a poller's parent is not among ``pollers``, or parents make a cycle."""
    for name, poller in pollers.items():
        if poller.parent is None:
            continue
        path = f"poller '{name}'.parent.poller"
        try:
            ancestry(pollers, name)
        except KeyError as exc:
            raise ConfigError(f"unknown parent poller {exc.args[0]!r}", path) from None
        except ValueError as exc:
            raise ConfigError(str(exc), path) from None


def _tenant_partition(roster: Roster, poller: Poller, key: str) -> Partition | None:
    """``key`` of the child ``poller`` with its tenant's live data, if the tenant is listed."""
    pollers = roster.definitions()
    try:
        chain = ancestry(pollers, poller.name)
    except (KeyError, ValueError):
        return None
    split = split_child(key, len(chain) - 1)
    if split is None:
        return None
    tenant, parents = split
    listed = roster.listings.partition(chain[-1], tenant)
    return None if listed is None else Partition(key, listed.data, parents)


async def child_listing(roster: Roster, poller: Poller) -> dict[str, Partition]:
    """What a child poller "lists": its stored keys whose tenant is listed now; a fan-out
    poller, its own listing. Keys paused for ``retain`` by their parent, their tenant's
    removal or their value leaving the list are deleted first (each listing is a refresh of
    the poller, so they go within a refresh interval of expiring)."""
    # Keys waiting for a trigger are neither paused nor listed: not even decoded for this.
    gone = expired(poller, roster.store.states_of(poller.name, waiting=False), roster.clock.now())
    # At once, so the store's committer batches them (a tenant removed a retain ago may take
    # thousands of children with it); a bounded number a refresh, the rest at the next one.
    async with asyncio.TaskGroup() as group:
        for key in gone[:EXPIRED_PER_REFRESH]:
            group.create_task(_expire(roster, poller, key))
    if poller.parent is None:
        return await own_listing(poller)
    out: dict[str, Partition] = {}
    keys = [s.partition for s in roster.store.states_of(poller.name, waiting=False)
            if not dormant(poller, s) or roster.runtime_of(s.key) is not None]  # fmt: skip
    # An on_change child waiting is not listed (it is held when triggered, rest()), unless it
    # is held now (an operation woke it): a store may leave those out of states_of as well.
    keys += [r.partition.key for r in roster.held(poller.name) if is_on_change(poller)]
    for key in keys:
        partition = _tenant_partition(roster, poller, key)
        if partition is not None:
            out[key] = partition
    return out


async def pause_dormant(roster: Roster, root: str, tenants: set[str]) -> None:
    """``tenants`` left ``root``'s listing: pause as removed the on_change children of theirs
    waiting for a trigger, which no listing holds (held keys are paused by the listing), so
    they expire after ``retain`` and resume if their tenant comes back, as any child does.
    Their states are decoded for it: this runs only when tenants go."""
    if not tenants:
        return
    pollers, now = roster.definitions(), roster.clock.now()
    for name in descendants(pollers, root):
        poller = pollers[name]
        if not is_on_change(poller):
            continue
        levels = len(ancestry(pollers, name)) - 1
        paused = [
            KeyCommit(state=state.paused_by("removed", now), fenced=False)
            for state in roster.store.states_of(name)
            if dormant(poller, state)
            and roster.runtime_of(state.key) is None
            and (split := split_child(state.partition, levels)) is not None
            and split[0] in tenants
        ]
        for at in range(0, len(paused), EXPIRED_PER_REFRESH):
            try:
                await roster.store.commit(paused[at : at + EXPIRED_PER_REFRESH])
            except (Fenced, Retriable) as exc:  # moved, or Kafka busy: left waiting
                log.info("%s: waiting children of removed tenants not paused: %s", name, exc)
                break


def rest(roster: Roster, runtime: KeyRuntime) -> None:
    """Let an on_change child whose poll is done go until its next trigger (it is
    :func:`~watukuy.core.onchange.dormant`): no runtime, no listing entry, no schedule entry,
    so a runner holding a million of them spends memory and CPU only on those triggered. Its
    committed state says it waits; the trigger (:func:`received`) or an operation
    (:func:`wake`) holds it again from the store."""
    roster.drop(runtime, KeyPhase.DORMANT)
    roster.listings.unlist(runtime.poller.name, runtime.partition.key)


async def wake(roster: Roster, poller: Poller, key: str) -> None:
    """Hold a dormant on_change child an operation names (a user's ``trigger``, ``pause``,
    ``reset``...), if this instance owns it and its state is stored: it is listed and
    activated as a trigger does, then the operation applies to it as to any held key."""
    if not is_on_change(poller) or not roster.store.owns(poller.name, key):
        return
    if await roster.store.load(poller.name, key, snapshot=False) is None:
        return
    partition = await _tenant_of(roster, poller, key)
    if partition is not None:
        roster.listings.of(poller.name).current[key] = partition
        await roster.activate_listed(poller.name, [key])


async def _expire(roster: Roster, poller: Poller, key: str) -> None:
    try:
        await roster.remove(poller.name, key)
    except (Fenced, Retriable) as exc:  # moved, or Kafka busy: its next owner's refresh, or ours
        log.info("%s: expired child not deleted yet: %s", key_text(poller.name, key), exc)
        return
    log.info("%s: partition deleted: paused for its retain", key_text(poller.name, key))


async def _tenant_of(roster: Roster, poller: Poller, key: str) -> Partition | None:
    """As :func:`_tenant_partition`, listing the root first if it never was (a runner that
    just started) or lacks the tenant (added since its last listing)."""
    found = _tenant_partition(roster, poller, key)
    if found is not None:
        return found
    # Commands of several keys apply at once (.received): one listing at a time, so that two
    # do not both hold the keys a listing adds.
    lock = _LISTING.setdefault(roster, asyncio.Lock())
    async with lock:
        return await _listed_for(roster, poller, key)


async def _listed_for(roster: Roster, poller: Poller, key: str) -> Partition | None:
    found = _tenant_partition(roster, poller, key)
    if found is not None:
        return found  # listed while this one waited for the lock
    chain = ancestry(roster.definitions(), poller.name)
    split = split_child(key, len(chain) - 1)
    if split is None:
        return None
    table = roster.listings.table(chain[-1])
    if table is not None and table.refreshed_at is None:
        await roster.refresh(chain[-1], force=False)
    else:
        await roster.list_for_command(chain[-1], split[0])
    return _tenant_partition(roster, poller, key)


async def received(roster: Roster, command: Command) -> None:
    """Apply an ``adopt``, ``pause_child`` or ``resume_child`` sent by a parent's commit (see
    the module). A child it creates is due at once, though held (on the queue) only once its
    tenant is found: until then, what is said served stays before it."""
    now = roster.clock.now()
    with roster.due.writing(now):
        await _received(roster, command, now)


async def _received(roster: Roster, command: Command, now: float) -> None:
    poller = roster.poller(command.poller)
    op = key_operation(command.op)
    key = command.partition
    runtime = roster.runtime_of(key_text(poller.name, key))
    if runtime is not None and runtime.held:
        async with runtime.lock:
            view = KeyView(poller, runtime.state, await roster.snapshots.hold(runtime))
            await roster.commit(runtime, _applied(roster, command, view, now))
        return
    if not roster.store.owns(poller.name, key):
        raise Fenced(f"{key_text(poller.name, key)}: owned by another instance")
    try:
        stored = await roster.store.load(poller.name, key)
    except NewerRelease as exc:
        # Its state is a newer release's: left (pending) for an instance that reads it.
        raise Conflict(f"{key_text(poller.name, key)}: {exc}") from None
    if stored is None and op.name != "adopt":
        await roster.store.remove(poller.name, key, command.id)  # no child: nothing to do
        return
    if stored is None:
        state = fresh_state(poller, key, now)  # due at once
        view = KeyView(poller, state, {})
    else:
        view = KeyView(poller, stored.state, stored.snapshot)
    await roster.store.commit([_applied(roster, command, view, now)])
    if stored is None:
        log.info("%s: child partition created", key_text(poller.name, key))
    partition = await _tenant_of(roster, poller, key)
    if partition is not None:  # else held once its tenant is listed
        roster.listings.of(poller.name).current[key] = partition
        await roster.activate_listed(poller.name, [key])


def _applied(roster: Roster, command: Command, view: KeyView, now: float) -> KeyCommit:
    """The commit applying ``command`` to the key: its new state, the command taken away, and
    what a pause by its parent (or the end of one) asks of its own children."""
    state = key_operation(command.op).apply(view, {}, now).state
    sends = cascade(roster.definitions(), view.poller, view.state, state, view.snapshot, now)
    return KeyCommit(state=state, commands=(command.id,), sends=sends)
