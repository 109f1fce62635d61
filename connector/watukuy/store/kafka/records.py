"""What each internal record looks like on the wire: keys, values, and their decoding.

Record keys follow the layout in DESIGN.md: ``poller/partition`` for state,
``poller/partition/identity`` for snapshot entries, ``poller/partition/id`` for parked items,
``cmd/poller/partition/<uuid>`` for commands. A partition key or an identity may itself hold
``/``, so those segments are percent-escaped (``/`` and ``%`` only); the co-partitioning hash
is always taken over the plain ``poller/partition``, which every value also carries.

Values are Avro single-object encoded with versioned schemas (:mod:`watukuy.serde.state`), so
a later release reads them through schema resolution. A record that cannot be decoded raises
:class:`StateCorrupted`: the store must not guess at state.
"""

from __future__ import annotations

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
from watukuy.store.base import Command

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
# A command's ``op`` is one of watukuy.core.operations.KEY_OPERATIONS (the Avro enum of
# schemas/state/command.avsc lists the same names; a test keeps them equal) and its ``args``
# are that operation's JSON form: the engine decodes them with the registry when it applies.


def escape(segment: str) -> str:
    return segment.replace("%", "%25").replace("/", "%2F")


def unescape(segment: str) -> str:
    return segment.replace("%2F", "/").replace("%25", "%")


def key_of(poller: str, partition: str) -> str:
    """The store key and the co-partitioning hash input."""
    return f"{poller}/{partition}"


def state_key(poller: str, partition: str) -> bytes:
    return key_of(poller, partition).encode()


def item_key(poller: str, partition: str, identity: str) -> bytes:
    return f"{poller}/{escape(partition)}/{escape(identity)}".encode()


def parked_key(poller: str, partition: str, parked_id: str) -> bytes:
    return f"{poller}/{escape(partition)}/{escape(parked_id)}".encode()


def command_key(command: Command) -> bytes:
    return f"{COMMAND_PREFIX}{command.poller}/{escape(command.partition)}/{command.id}".encode()


def is_command(record_key: bytes | None) -> bool:
    return record_key is not None and record_key.startswith(COMMAND_PREFIX.encode())
