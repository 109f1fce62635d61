"""What each internal record looks like on the wire: keys, values, and their decoding.

Record keys follow the layout in docs/concepts.md ("Topics, by name"): ``poller/partition``
for state, ``poller/partition/identity`` for snapshot entries, ``poller/partition/id`` for
parked items, ``cmd/poller/partition/<uuid>`` for commands. A partition key or an identity
may itself hold ``/``, so those segments are percent-escaped (``/`` and ``%`` only); the
co-partitioning hash is always taken over the plain ``poller/partition``, which every value
also carries.

Values are Avro single-object encoded with versioned schemas (:mod:`watukuy.serde.state`), so
a later release reads them through schema resolution. A record that cannot be decoded raises
:class:`StateCorrupted`: the store must not guess at state.
"""

from __future__ import annotations

from watukuy.core.errors import StateCorrupted
from watukuy.core.keys import KeyId, key_text
from watukuy.serde.state import (
    decode_command,
    decode_item,
    decode_parked,
    decode_state,
    encode_command,
    encode_item,
    encode_parked,
    encode_state,
)

__all__ = [
    "decode_command",
    "decode_item",
    "decode_parked",
    "decode_state",
    "encode_command",
    "encode_item",
    "encode_parked",
    "encode_state",
]

COMMAND_PREFIX = "cmd/"
_SEPARATOR = b"/"  # between the owner part of a record key and its last segment
# A command's ``op`` is one of watukuy.core.operations.KEY_OPERATIONS (the Avro enum of
# schemas/state/command.avsc lists the same names; a test keeps them equal) and its ``args``
# are that operation's JSON form: the engine decodes them with the registry when it applies.


def escape(segment: str) -> str:
    return segment.replace("%", "%25").replace("/", "%2F")


def unescape(segment: str) -> str:
    return segment.replace("%2F", "/").replace("%25", "%")


def state_key(poller: str, partition: str) -> bytes:
    """A key's state record key: its text form, as is (also the co-partitioning hash input)."""
    return key_text(poller, partition).encode()


def owner_key(key: KeyId) -> bytes:
    """What the key's item, parked and command record keys hold of it: its text form with the
    partition escaped, so the segments after it stay apart even in a child's partition."""
    return key_text(key.poller, escape(key.partition)).encode()


def item_key(poller: str, partition: str, identity: str) -> bytes:
    return _below(owner_key(KeyId(poller, partition)), identity)


def parked_key(poller: str, partition: str, parked_id: str) -> bytes:
    return _below(owner_key(KeyId(poller, partition)), parked_id)


def command_key(poller: str, partition: str, command_id: str) -> bytes:
    """Where a command waits for the key's owner: ``cmd/`` + its owner part + its id (a uuid's
    hex, written unescaped)."""
    owner = owner_key(KeyId(poller, partition))
    return COMMAND_PREFIX.encode() + owner + _SEPARATOR + command_id.encode()


def is_command(record_key: bytes | None) -> bool:
    return record_key is not None and record_key.startswith(COMMAND_PREFIX.encode())


def owner_of(record_key: bytes) -> bytes:
    """The owner part of an item or parked record key (what :func:`owner_key` wrote)."""
    return record_key.rpartition(_SEPARATOR)[0]


def last_segment(record_key: bytes) -> str:
    """The identity or parked id of an item or parked record key, unescaped.

    Every segment after the poller's name is escaped, so the owner part holds exactly one
    separator; anything else is not a record key this layout wrote.
    """
    owner, separator, segment = record_key.rpartition(_SEPARATOR)
    if not separator or owner.count(_SEPARATOR) != 1:
        raise StateCorrupted(f"unreadable record key {record_key!r}")
    return unescape(segment.decode())


def _below(owner: bytes, segment: str) -> bytes:
    return owner + _SEPARATOR + escape(segment).encode()
