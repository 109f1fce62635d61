"""The key of a poller's partition: one value type, one text form.

A key is ``(poller, partition)``: the poller's name and the seed's partition (a tenant, or a
child stream's ``tenant/parent[/...]``). Its text form ``poller/partition`` keys the Kafka
records of events and state and picks their Kafka partition. A poller's name never holds
``/`` (it matches :data:`POLLER_NAME`) while a partition key may, so only the first ``/``
separates them: nothing but :meth:`KeyId.parse` reads a key's text, and nothing but
:func:`key_text` writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["POLLER_NAME", "KeyId", "key_part", "key_text"]

POLLER_NAME = re.compile(r"[A-Za-z0-9._-]+")
"""What a poller's (and a connector's) name may hold."""

_SEPARATOR = "/"


def key_part(value: object) -> str | None:
    """``value`` as one part of a partition key (a fan-out value, a webhook's child key), or
    ``None`` when it cannot be one: not text or an integer (a bool is not one), empty, or
    holding ``/``, which would make the key ambiguous."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    return text if text and _SEPARATOR not in text else None


def key_text(poller: str, partition: str) -> str:
    """The text form of the key ``(poller, partition)``, without building a :class:`KeyId`.

    The hot paths (one call per event) use this; everything else may use ``KeyId.text``.
    """
    return f"{poller}{_SEPARATOR}{partition}"


@dataclass(frozen=True, slots=True, order=True)
class KeyId:
    """One key: ``poller`` (a name without ``/``) and ``partition`` (any string)."""

    poller: str
    partition: str

    @property
    def text(self) -> str:
        """``poller/partition``: the Kafka record key and the key's name in logs and errors."""
        return key_text(self.poller, self.partition)

    def __str__(self) -> str:
        return key_text(self.poller, self.partition)

    @classmethod
    def parse(cls, text: str) -> KeyId:
        """The key whose text form is ``text``; ``ValueError`` when ``text`` is not one.

        The poller's name ends at the first ``/``; whatever follows, ``/`` included, is the
        partition (a child stream's ``tenant/parent``).
        """
        poller, separator, partition = text.partition(_SEPARATOR)
        if not separator or POLLER_NAME.fullmatch(poller) is None:
            raise ValueError(f"not a key of the form poller/partition: {text!r}")
        return cls(poller, partition)

    @classmethod
    def parse_bytes(cls, raw: bytes) -> KeyId:
        """:meth:`parse` of a Kafka record key (UTF-8; undecodable bytes are replaced)."""
        return cls.parse(raw.decode(errors="replace"))

    def encode(self) -> bytes:
        """The text form as a Kafka record key."""
        return self.text.encode()
