"""Child streams: what a parent's page asks of its children's keys, and how a child key reads.

A child poller (one with :attr:`~watukuy.core.poller.Poller.parent`) has one partition per
parent item: ``<parent partition>/<parent item key>``, so ``acme/P1``, then ``acme/P1/I7`` for a
grandchild. Its keys are state, not configuration: the parent's commit carries the commands
(:func:`sends`) that create them (``adopt``) or pause them (``pause_child``), and the child key's
owner applies them. Only the parent's *events* send anything: an unchanged parent item sends
nothing, so children are not re-read when their parent is polled again.

A parent item whose key cannot be read (absent, empty, or holding ``/``, which would make the
child's key ambiguous) is parked ``invalid`` with the reason: never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from watukuy.core.changes import invalid_item
from watukuy.core.commands import Command
from watukuy.core.events import Event
from watukuy.core.poller import Partition, Poller
from watukuy.core.state import ParkedItem, PartitionState, PauseReason, SnapshotEntry

__all__ = [
    "ChildSends",
    "ancestry",
    "cascade",
    "child_key",
    "children_of",
    "depth",
    "descendants",
    "expired",
    "root_of",
    "sends",
    "split_child",
]

_SEPARATOR = "/"

_EXPIRING: frozenset[PauseReason] = frozenset({"parent", "removed"})
"""Pauses a child key expires from: its parent's, its tenant's removal (not a user's)."""


@dataclass(slots=True)
class ChildSends:
    """What one parent page asks of its children: the commands, and parent items parked."""

    commands: list[Command] = field(default_factory=list)
    parked: list[ParkedItem] = field(default_factory=list)


def child_key(parent_partition: str, item_key: str) -> str:
    return f"{parent_partition}{_SEPARATOR}{item_key}"


def ancestry(pollers: Mapping[str, Poller], name: str) -> list[str]:
    """``name`` and its parents up to the root (a poller without parent), nearest first.

    ``KeyError`` if a parent is unknown; ``ValueError`` on a cycle."""
    chain = [name]
    poller = pollers[name]
    while poller.parent is not None:
        name = poller.parent.poller
        if name in chain:
            raise ValueError(f"parent cycle: {' -> '.join([*chain, name])}")
        chain.append(name)
        poller = pollers[name]
    return chain


def children_of(pollers: Mapping[str, Poller], name: str) -> list[Poller]:
    """The pollers whose parent is ``name`` (its direct children)."""
    return [p for p in pollers.values() if p.parent is not None and p.parent.poller == name]


def descendants(pollers: Mapping[str, Poller], root: str) -> list[str]:
    """Every child poller whose root is ``root`` (children, grandchildren...)."""
    out = []
    for name, poller in pollers.items():
        if poller.parent is None:
            continue
        try:
            chain = ancestry(pollers, name)
        except (KeyError, ValueError):
            continue  # refused by check_parents; a poller removed at run time leaves orphans
        if chain[-1] == root:
            out.append(name)
    return out


def root_of(pollers: Mapping[str, Poller], name: str) -> str:
    return ancestry(pollers, name)[-1]


def depth(pollers: Mapping[str, Poller], name: str) -> int:
    """How many parent item keys a key of ``name`` holds after its tenant (0: a root)."""
    return len(ancestry(pollers, name)) - 1


def split_child(partition: str, levels: int) -> tuple[str, tuple[str, ...]] | None:
    """A child key's tenant and its ancestors' item keys, nearest first; ``None`` if it has
    fewer than ``levels`` parts. Item keys hold no ``/`` (:func:`sends` parks those that do),
    so the tenant is what is left before the last ``levels`` parts, ``/`` and all."""
    if levels == 0:
        return partition, ()
    parts = partition.rsplit(_SEPARATOR, levels)
    if len(parts) != levels + 1:
        return None
    return parts[0], tuple(reversed(parts[1:]))


def tenant_of(partition: Partition) -> str:
    """The tenant a partition belongs to: its own key for a tenant, the part before its
    ancestors' item keys for a child (``acme/P1/I7`` -> ``acme``)."""
    found = split_child(partition.key, len(partition.parents))
    return partition.key if found is None else found[0]


def _item_key(child: Poller, item: Any) -> str:
    """The parent item's key for ``child``; ``ValueError`` saying why there is none."""
    assert child.parent is not None
    try:
        raw = child.parent.key(item)
    except Exception as exc:
        raise ValueError(f"key() raised {type(exc).__name__}: {exc}") from exc
    if isinstance(raw, bool) or not isinstance(raw, str | int) or raw == "":
        raise ValueError(f"key() returned {raw!r}")
    text = str(raw)
    if _SEPARATOR in text:
        raise ValueError(f"the key {text!r} holds '/', which would make the child key ambiguous")
    return text


def _wanted(child: Poller, item: Any) -> bool:
    where = child.parent.where if child.parent is not None else None
    if where is None:
        return True
    try:
        return bool(where(item))
    except Exception:
        return False  # a filter that cannot read the item does not match it


def sends(
    parent: Poller,
    partition: str,
    children: Sequence[Poller],
    events: Sequence[Event],
    now: float,
    parked: Set[str] = frozenset(),
) -> ChildSends:
    """The commands ``events`` (one committed page of ``parent``) send to child keys.

    ``created`` (or ``updated``) and within ``where``: ``adopt``, which creates the key or
    resumes it, and changes nothing on a live one. ``updated`` out of ``where``, or
    ``deleted``: ``pause_child``. A deletion found by a reconcile carries no item: its child
    is found by the item's identity, which is the key in the usual ``key: id``.
    ``parked`` holds the ids already parked on the parent key (parked once, not per poll).
    """
    out = ChildSends()
    for event in events:
        for child in children:
            if event.type == "deleted" and event.data is None:
                key = event.subject
            else:
                try:
                    key = _item_key(child, event.data)
                except ValueError as exc:
                    error = f"child stream '{child.name}' has no key for this item: {exc}"
                    item = invalid_item(
                        parent,
                        partition,
                        event.data,
                        error,
                        event.lane,
                        now,
                        event.subject,
                        event.data,  # already published: a transformed parent's, as it shows
                    )
                    if item.id not in parked:
                        out.parked.append(item)
                    continue
            target = child_key(partition, key)
            if event.type != "deleted" and _wanted(child, event.data):
                op = "adopt"
            elif event.type == "created":
                continue  # never wanted: there is no child to pause
            else:
                op = "pause_child"
            out.commands.append(Command.issue(op, child.name, target, {}, now))
    return out


def expired(child: Poller, states: Iterable[PartitionState], now: float) -> list[str]:
    """The keys of ``child`` paused by their parent item or their tenant's removal for at least
    its ``retain``: they are deleted, as a deleted item is forgotten after ``retain``, so child
    state does not grow without bound as parent items come and go. A key a user paused stays.
    ``[]`` for a poller that is neither a child nor a fan-out stream."""
    if not child.expires_keys:
        return []
    return [
        state.partition
        for state in states
        if state.paused in _EXPIRING
        and state.paused_at is not None
        and now - state.paused_at >= child.retain
    ]


def cascade(
    pollers: Mapping[str, Poller],
    child: Poller,
    before: PartitionState,
    after: PartitionState,
    snapshot: Mapping[str, SnapshotEntry],
    now: float,
) -> list[Command]:
    """What a child key paused by its parent (or resumed from that pause) asks of its own
    children: the same, so a deleted project's issues stop reading their comments too, and
    resume with it. Sent to the key of each live item of its snapshot, by identity (the
    snapshot keeps no item): a grandchild keyed by another path is not reached, and a
    ``resume_child`` or ``pause_child`` of a key never stored only takes the command away."""
    if before.paused != "parent" and after.paused == "parent":
        op = "pause_child"
    elif before.paused == "parent" and after.paused is None:
        op = "resume_child"
    else:
        return []
    key = after.partition
    return [
        Command.issue(op, grandchild.name, child_key(key, identity), {}, now)
        for grandchild in children_of(pollers, child.name)
        for identity, entry in snapshot.items()
        if entry.deleted is None and _SEPARATOR not in identity
    ]
