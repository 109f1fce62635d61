"""Change detection: a page of items against a key's snapshot becomes events.

New identity: ``created``; another version: ``updated``; the same version: nothing (unless the
lane is replaying). A completed reconcile scan turns every live snapshot entry it did not see
into ``deleted``. Items whose identity or version cannot be computed, that fail the data
schema, or whose event the store could not publish (too large for its topic) are parked
``invalid`` and hold nothing else up; they take no sequence number, so the numbers stay
gap-free. An invalid item already parked with the same content is not parked again (a
timestamp cursor serves the last item of a page twice).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from watukuy.core.events import Event, EventType, canonical_json, event_id, fingerprint, utc
from watukuy.core.poller import Poller, Unreadable
from watukuy.core.state import TRANSFORMED_MARK, ParkedItem, SnapshotEntry
from watukuy.core.transforms import Transform, TransformContext


@dataclass(slots=True)
class Detected:
    """Outcome of detection on one page. ``upserts`` are the snapshot entries to write."""

    sequence: int
    events: list[Event] = field(default_factory=list)
    upserts: dict[str, SnapshotEntry] = field(default_factory=dict)
    parked: list[ParkedItem] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Identified:
    identity: str
    version: str
    item: Any


def identify(poller: Poller, item: Any) -> Identified:
    """Identity and version of ``item``; raises ``ValueError`` describing why not."""
    identity, version = _identity_version(poller, item)
    return Identified(identity=identity, version=version, item=item)


def _identity_version(poller: Poller, item: Any) -> tuple[str, str]:
    # A plain tuple: detection runs this once per item, and no object per item is kept.
    if type(item) is Unreadable:
        raise ValueError(item.reason)
    try:
        raw_identity = poller.identity(item)
    except Exception as exc:
        raise ValueError(f"identity() raised {type(exc).__name__}: {exc}") from exc
    # A non-empty str, the common case, is tested here: a call of _as_text less per item.
    if type(raw_identity) is str and raw_identity:
        identity = raw_identity
    else:
        identity = _as_text(raw_identity, "identity")
    try:
        if poller.version is not None:
            version = poller.version(item)
            if type(version) is not str or not version:
                version = _as_text(version, "version")
        elif poller.fingerprint is not None:
            version = _as_text(poller.fingerprint(item), "fingerprint")
        else:
            version = fingerprint(item)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"version() raised {type(exc).__name__}: {exc}") from exc
    return identity, version


def identities(poller: Poller, items: Iterable[Any]) -> list[str]:
    """The identities of ``items`` that have one: the snapshot entries :func:`detect` looks
    at for them (an item without one is parked, and looks at none)."""
    out: list[str] = []
    for item in items:
        if type(item) is Unreadable:
            continue
        try:
            out.append(_as_text(poller.identity(item), "identity"))
        except Exception:  # detect parks it, with the reason
            continue
    return out


def _as_text(value: Any, what: str) -> str:
    if type(value) is str and value:  # the common case first: one type check
        return value
    if isinstance(value, bool) or value is None or value == "":
        raise ValueError(f"{what}() returned {value!r}")
    if isinstance(value, str | int):
        return str(value)
    raise ValueError(f"{what}() must return a string or an integer, got {type(value).__name__}")


def parked_form(poller: Poller, item: Any, published: Any = None) -> Any:
    """What is parked of ``item``: the vendor's item; for a poller that transforms items, a
    stand-in holding what it would publish (``published``), or only a hash when it could not
    be transformed. The parked topic and the DLQ are Kafka too: what the transform keeps out of
    the events (a dropped note, an e-mail before masking) must not reach them that way."""
    if poller.transform is None:
        return item
    if published is not None:
        return {TRANSFORMED_MARK: True, "item": published}
    digest = hashlib.sha256(canonical_json(item).encode()).hexdigest()
    return {TRANSFORMED_MARK: True, "item": None, "original_sha256": digest}


def invalid_item(
    poller: Poller,
    partition: str,
    item: Any,
    error: str,
    lane: str,
    now: float,
    subject: str | None = None,
    published: Any = None,
) -> ParkedItem:
    """``item`` parked ``invalid``: its id is of the vendor's item (parked once however often
    it is polled); what is kept of it is :func:`parked_form`."""
    parked_id = event_id(poller.name, partition, "", canonical_json(item), "invalid")
    return ParkedItem(
        id=parked_id,
        poller=poller.name,
        partition=partition,
        kind="invalid",
        item=parked_form(poller, item, published),
        error=error,
        attempts=1,
        parked_at=now,
        lane=lane,
        subject=subject,
    )


def _park(out: Detected, parked: Container[str], item: ParkedItem) -> None:
    if item.id not in parked:  # the same content parked once: one DLQ record, not one a poll
        out.parked.append(item)


def _read(
    poller: Poller, partition: str, item: Any, lane: str, now: float
) -> tuple[str, str] | ParkedItem:
    """The item's identity and version, or the invalid item to park instead."""
    try:
        identity, version = _identity_version(poller, item)
    except ValueError as exc:
        vendors = item.item if type(item) is Unreadable else item
        return invalid_item(poller, partition, vendors, str(exc), lane, now)
    problem = poller.validate(item) if poller.validate is not None else None
    if problem is not None:  # parked before the snapshot sees it: a fix is a change
        return invalid_item(poller, partition, item, f"SchemaError: {problem}", lane, now)
    return identity, version


@dataclass(frozen=True, slots=True)
class _Left:
    """An item that ``transform.filter`` leaves out; ``identity`` None when it has none
    either (it was never published: there is nothing to delete)."""

    identity: str | None


Read = tuple[tuple[str, str] | ParkedItem | _Left, Any]
"""An item's identity and version (or why not) and its published form."""


def _reader(
    poller: Poller, transform: Transform, partition: str, lane: str, now: float
) -> Callable[[Any], Read]:
    context = transform.context(partition)  # once per page
    return lambda item: _read_transformed(poller, transform, context, partition, item, lane, now)


def _read_transformed(
    poller: Poller,
    transform: Transform,
    context: TransformContext,
    partition: str,
    item: Any,
    lane: str,
    now: float,
) -> Read:
    """Like :func:`_read`, with the published item: identity and version read the vendor's
    item, the fingerprint and the schema the published one."""
    if type(item) is Unreadable:  # parked before any filter could leave it out unseen
        return invalid_item(poller, partition, item.item, item.reason, lane, now), None
    keep = transform.filter  # Transform.matches, without a call per item
    if keep is not None and not keep(item):
        try:
            return _Left(_as_text(poller.identity(item), "identity")), None
        except Exception:
            return _Left(None), None
    published = None
    try:
        published = transform.reshape(item, context)
        identity = _as_text(poller.identity(item), "identity")
        if poller.version is not None:
            version = _as_text(poller.version(item), "version")
        elif poller.fingerprint is not None:
            version = _as_text(poller.fingerprint(published), "fingerprint")
        else:
            version = fingerprint(published)
    except Exception as exc:
        error = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        return invalid_item(poller, partition, item, error, lane, now, None, published), None
    problem = poller.validate(published) if poller.validate is not None else None
    if problem is not None:
        error = f"SchemaError: {problem}"
        return invalid_item(poller, partition, item, error, lane, now, None, published), None
    return (identity, version), published


def _set_aside(
    out: Detected,
    poller: Poller,
    partition: str,
    read: ParkedItem | _Left,
    snapshot: Mapping[str, SnapshotEntry],
    parked: Container[str],
    lane: str,
    now: float,
) -> None:
    """An item that is parked, or that the filter leaves out: the latter is published once
    as ``deleted`` if it was live."""
    if isinstance(read, ParkedItem):
        _park(out, parked, read)
        return
    identity = read.identity
    previous = None if identity is None else out.upserts.get(identity) or snapshot.get(identity)
    if identity is None or previous is None or previous.deleted is not None:
        return
    out.sequence += 1
    out.events.append(
        Event(
            event_id(poller.name, partition, identity, previous.version, "deleted"),
            poller.name,
            partition,
            identity,
            "deleted",
            previous.version,
            out.sequence,
            utc(now),
            lane,
            poller.schema_version,
            None,
        )
    )
    out.upserts[identity] = SnapshotEntry(previous.version, now, previous.scan, deleted=now)


def _change(
    in_page: SnapshotEntry | None, previous: SnapshotEntry | None, version: str, replaying: bool
) -> EventType | None:
    """What seeing ``version`` of an item makes of it: ``previous`` is the page's own entry
    (``in_page``) or else the snapshot's."""
    if in_page is not None and in_page.version == version and in_page.deleted is None:
        return None  # the same version twice in one page is one change, replaying or not
    if previous is None or previous.deleted is not None:
        return "created"
    if previous.version != version:
        return "updated"
    return "updated" if replaying else None


def detect(
    poller: Poller,
    partition: str,
    items: list[Any],
    snapshot: Mapping[str, SnapshotEntry],
    *,
    lane: str,
    sequence: int,
    now: float,
    scan: int | None = None,
    replaying: bool = False,
    parked: Container[str] = (),
    publishable: Callable[[Event], str | None] | None = None,
) -> Detected:
    """Events for ``items`` against ``snapshot``; ``scan`` marks entries seen by a reconcile,
    ``parked`` holds the ids of the key's parked items, ``publishable`` says why an event
    cannot be published (``None`` when it can)."""
    out = Detected(sequence=sequence)
    # What every event of the page shares is computed once per page, not per item.
    name, schema_version, time = poller.name, poller.schema_version, utc(now)
    upserts, events = out.upserts, out.events
    transform = poller.transform  # without one, an item is read here: no call per item more
    read_item = None if transform is None else _reader(poller, transform, partition, lane, now)
    for item in items:
        if read_item is not None:
            read, published = read_item(item)
        else:
            read, published = _read(poller, partition, item, lane, now), item
        if not isinstance(read, tuple):  # parked, or left out by the filter
            _set_aside(out, poller, partition, read, snapshot, parked, lane, now)
            continue
        identity, version = read
        in_page = upserts.get(identity)
        previous = in_page or snapshot.get(identity)
        kind = _change(in_page, previous, version, replaying)
        if kind is not None:
            event = Event(
                event_id(name, partition, identity, version),
                name,
                partition,
                identity,
                kind,
                version,
                out.sequence + 1,
                time,
                lane,
                schema_version,
                published,
            )
            refused = publishable(event) if publishable is not None else None
            if refused is not None:  # parked like a schema error: a fix is a change
                why = invalid_item(poller, partition, item, refused, lane, now, identity, published)
                _park(out, parked, why)
                continue
            out.sequence += 1
            events.append(event)
        if kind is not None or scan is not None:
            keep_scan = scan if scan is not None else (previous.scan if previous else 0)
            upserts[identity] = SnapshotEntry(version, now, keep_scan)
    return out


def deletions(
    poller: Poller,
    partition: str,
    snapshot: Mapping[str, SnapshotEntry],
    detected: Detected,
    *,
    scan: int,
    now: float,
) -> None:
    """After a completed reconcile pass: ``deleted`` for every live entry the pass missed."""
    for identity, entry in sorted(snapshot.items()):
        current = detected.upserts.get(identity, entry)
        if current.deleted is not None or current.scan == scan:
            continue
        detected.sequence += 1
        detected.events.append(
            Event(
                id=event_id(poller.name, partition, identity, current.version, "deleted"),
                poller=poller.name,
                partition=partition,
                subject=identity,
                type="deleted",
                version=current.version,
                sequence=detected.sequence,
                time=utc(now),
                lane="reconcile",
                schema_version=poller.schema_version,
                data=None,
            )
        )
        detected.upserts[identity] = SnapshotEntry(
            version=current.version, seen=current.seen, scan=current.scan, deleted=now
        )


def expired(snapshot: Mapping[str, SnapshotEntry], retain: float, now: float) -> list[str]:
    """Deleted entries older than ``retain``: they may now be forgotten."""
    return [
        identity
        for identity, entry in snapshot.items()
        if entry.deleted is not None and now - entry.deleted >= retain
    ]
