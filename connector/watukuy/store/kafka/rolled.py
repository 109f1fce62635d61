"""Restored keys rolled forward over events they had published, written at once.

A transaction's state records can be lost while its events were committed (as when a hanging
transaction is aborted): :mod:`.catchup` finds such a key's missed events when its partition
is restored, and :mod:`.catchup_rule` rolls its sequence and snapshot forward over them. The
rolled picture is written here, ahead of anything the engine commits on the partition, so the
events stay accounted for after the next restore; a write that fails is carried by the key's
next commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from watukuy.core.errors import NewerRelease, StateCorrupted
from watukuy.core.observe import Observer
from watukuy.core.state import SnapshotEntry
from watukuy.store.base import KeyCommit
from watukuy.store.kafka.restore import RestoredKeys
from watukuy.store.kafka.view import OwnedKeys

__all__ = ["write_rolled"]

log = logging.getLogger("watukuy.kafka")

Done = Callable[[BaseException | None], None]
Write = Callable[[KeyCommit, int, int, Done], bool]
"""Writes a commit alone on a Kafka partition under a lease generation, answering ``done``;
``False`` when the store is closing (the partition's next owner writes it)."""


def write_rolled(
    keys: RestoredKeys,
    kafka_partition: int,
    generation: int,
    *,
    view: OwnedKeys,
    observer: Observer,
    write: Write,
) -> None:
    """Write the picture of each key of ``keys`` whose restored state was rolled forward."""
    for key in keys.names():
        missed = keys.missed(key)
        if not missed:
            continue  # most keys: not even their state is looked at (it may be asleep)
        state = view.state(key)
        if state is None:
            continue
        try:
            snapshot, _ = view.taken(key)  # rolled forward as it is taken
        except (NewerRelease, StateCorrupted) as exc:
            log.warning("%s: cannot roll its snapshot forward: %s", key, exc)
            continue
        log.warning(
            "%s: its stored state missed %d event(s) it had published (sequence %d to %d):"
            " a transaction's state records were lost while its events were committed (as"
            " when a hanging transaction is aborted); its sequence and snapshot are rolled"
            " forward over them, so they are not published again",
            key,
            len(missed),
            missed[0].sequence,
            missed[-1].sequence,
        )
        upserts = {event.subject: snapshot[event.subject] for event in missed}
        commit = KeyCommit(state=state, upserts=upserts)
        if not write(commit, kafka_partition, generation, partial(_written, view, key, upserts)):
            return
        observer.state_caught_up(state.poller, state.partition, len(missed))
        view.rolling(key, upserts)


def _written(
    view: OwnedKeys, key: str, upserts: dict[str, SnapshotEntry], error: BaseException | None
) -> None:
    if error is None:
        view.rolled(key, upserts)
    elif view.roll_later(key, upserts):
        why = "writing its rolled-forward snapshot failed (%s); its next commit carries it"
        log.warning("%s: " + why, key, error)
