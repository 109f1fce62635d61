"""A key's stored state caught up with the events it has already published (pure: the rule
that :mod:`.restore` applies to what :mod:`.catchup` reads).

A key's events and its state are written in one transaction, so normally a restored state
accounts for every event of the key (its ``sequence`` is the last one's). Kafka can break that:
after a broker is killed, its transaction coordinator may complete a commit without writing the
markers of partitions it has no leader for yet, and the transaction then hangs there. The
events partitions got their commit marker; the state and snapshot records did not, and once an
operator aborts the hanging transaction (the only way to end it), the key's state is back
where it was before that commit, under events already published.

Polled again from that older cursor, the key would publish those changes a second time, with
the same ids and sequence numbers. So a restore reads what the key published after its stored
state, and rolls the state forward over it: the sequence continues after the last event, and
the snapshot holds each item's published version, so the next poll finds those items
unchanged. The cursor cannot be recovered from events; the key polls again from its stored
cursor and publishes only what is new.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from watukuy.core.state import SnapshotEntry
from watukuy.serde.events import PublishedEvent

__all__ = ["PublishedEvent", "missed", "roll_forward"]


def missed(sequence: int, published: Iterable[PublishedEvent]) -> list[PublishedEvent]:
    """The published events a state at ``sequence`` does not account for, in order.

    ``published`` is in the order the events topic holds them. Only what follows the last event
    the state accounts for (a sequence number up to ``sequence``) counts, and of that only the
    run that continues ``sequence`` without a gap: anything else is not this state's
    continuation (a key removed and added again numbers its events from 1 again).
    """
    after: dict[int, PublishedEvent] = {}
    for event in published:
        if event.sequence <= sequence:
            after.clear()  # what came before an accounted event is accounted for too
        else:
            after.setdefault(event.sequence, event)
    out: list[PublishedEvent] = []
    expected = sequence + 1
    while expected in after:
        out.append(after[expected])
        expected += 1
    return out


def roll_forward(
    snapshot: Mapping[str, SnapshotEntry], events: Sequence[PublishedEvent]
) -> dict[str, SnapshotEntry]:
    """``snapshot`` as the commit of ``events`` would have left it.

    An entry takes the event's version, seen at the event's time; a ``deleted`` event marks its
    entry deleted, as a reconcile pass does. Reconcile marks (``scan``) are kept: the pass that
    made the events polls its page again, and marks what it sees then.
    """
    out = dict(snapshot)
    for event in events:
        previous = out.get(event.subject)
        scan = previous.scan if previous is not None else 0
        if event.type == "deleted":
            seen = previous.seen if previous is not None else event.time
            out[event.subject] = SnapshotEntry(event.version, seen, scan, deleted=event.time)
        else:
            out[event.subject] = SnapshotEntry(event.version, event.time, scan)
    return out
