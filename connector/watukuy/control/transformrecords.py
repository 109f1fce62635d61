"""Which transform each poller last published with, in the status topic; and ``validate``'s
warning when the config at hand has another one (issue 23).

One compacted record per poller, ``transform/<poller>``, holding the fingerprint of its
transform (:mod:`watukuy.core.transformprint`; ``null``: it published without one) and when
it was recorded. A runner writes it when a key of the poller published and the recorded
fingerprint is another (a poller that never had a transform writes nothing). The fingerprint
says nothing of an HMAC key, and nothing else is in the record. Pure: the status topic reads
and writes the records.

Like KIP-558's topic records (:mod:`.activetopics`), "published" counts a key's first look
above sequence 0: a runner that starts with a changed transform records it once its keys
have published at all, so ``validate`` warns before such a runner starts, not after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from watukuy.control.jsonrecord import json_record
from watukuy.core.errors import StateCorrupted
from watukuy.core.events import canonical_json
from watukuy.core.poller import Poller

__all__ = [
    "TransformRecord",
    "changed_transforms",
    "decode_transform",
    "fingerprint_of",
    "transform_record",
    "transform_warning",
    "transforms_to_record",
]

TRANSFORM_PREFIX = "transform/"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class TransformRecord:
    poller: str
    fingerprint: str | None
    """``None``: the poller published without a transform."""
    at: float


def fingerprint_of(poller: Poller) -> str | None:
    return None if poller.transform is None else poller.transform.fingerprint


def transform_record(record: TransformRecord) -> tuple[bytes, bytes]:
    value = {
        "format_version": FORMAT_VERSION,
        "poller": record.poller,
        "fingerprint": record.fingerprint,
        "at": record.at,
    }
    return f"{TRANSFORM_PREFIX}{record.poller}".encode(), canonical_json(value).encode()


def decode_transform(key: bytes, value: bytes | None) -> TransformRecord | None:
    """The record; ``None`` when ``key`` is not a transform record or is a tombstone. Raises
    :class:`StateCorrupted` for a value it cannot read."""
    text = key.decode("utf-8", errors="replace")
    if not text.startswith(TRANSFORM_PREFIX) or value is None:
        return None
    poller = text[len(TRANSFORM_PREFIX) :]
    record = json_record(value, f"transform record of poller {poller}", FORMAT_VERSION)
    fingerprint, at = record.get("fingerprint"), record.get("at")
    if not (fingerprint is None or isinstance(fingerprint, str)) or not isinstance(at, int | float):
        raise StateCorrupted(f"unreadable transform record of poller {poller}")
    return TransformRecord(poller, fingerprint, float(at))


def transforms_to_record(
    published: Iterable[str],
    recorded: Mapping[str, str | None],
    fingerprints: Mapping[str, str | None],
    now: float,
) -> list[TransformRecord]:
    """The records to write after ``published`` pollers published: those whose fingerprint
    (in ``fingerprints``, of the pollers running here) is not the recorded one. A poller
    without a transform and without a record writes none; one not running here (removed
    meanwhile) none either, for its fingerprint is not known."""
    out = []
    for poller in sorted(set(published) & fingerprints.keys()):
        current = fingerprints[poller]
        if poller in recorded:
            if recorded[poller] != current:
                out.append(TransformRecord(poller, current, now))
        elif current is not None:
            out.append(TransformRecord(poller, current, now))
    return out


def changed_transforms(pollers: Iterable[Poller], recorded: Mapping[str, str | None]) -> list[str]:
    """The pollers whose transform is not the one they last published with (a poller never
    recorded published nothing yet, or never had a transform: nothing changed for it)."""
    return sorted(
        poller.name
        for poller in pollers
        if poller.name in recorded and recorded[poller.name] != fingerprint_of(poller)
    )


def transform_warning(poller: str, *, removed: bool) -> str:
    """``validate``'s warning for a poller whose transform changed (``removed``: it has none
    now): the change applies to items polled from now on; a replay republishes the rest."""
    what = "its transform was removed" if removed else "its transform changed"
    how = "as the vendor sends them" if removed else "the new way (filtered, masked...)"
    return (
        f"warning: {poller}: {what} since it last published; only items polled from now on "
        f"are published {how}, what was published before stays as it was; "
        f"`watukuy-source replay --poller {poller} [--partition KEY] --from TIME` "
        f"(or POST /connectors/{poller}/partitions/{{key}}/replay) republishes history"
    )
