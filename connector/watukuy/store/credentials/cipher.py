"""AES-256-GCM for stored grants: the only form a grant takes in ``<prefix>.credentials``.

A value is one version byte, a 12-byte random nonce, then the ciphertext with its 16-byte tag;
the record key is the associated data, so a value moved to another tenant's key fails
authentication instead of handing one tenant's grant to another. Each value travels with the
id of its key (a record header): ``key_id(key)``, the first 16 hex digits of
``sha256(b"watukuy-credentials:" + key)``, which names a key without revealing it.

``credentials.keys: [new, old]`` rotates the key: values are written with the first and read
with any. Keys are parsed here (:func:`parse_key`) so every error names the setting
(``credentials.key``, ``credentials.keys[1]``) and never the value.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import string
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from watukuy.core.errors import ConfigError, WatukuyError

__all__ = ["Cipher", "Undecryptable", "key_id", "parse_key", "parse_keys"]

VERSION = 1
NONCE_BYTES = 12
KEY_BYTES = 32
_ID_CONTEXT = b"watukuy-credentials:"
_FORM = (
    "must be 32 bytes written as base64 or as 64 hex characters "
    "(e.g. the output of 'openssl rand -base64 32')"
)


class Undecryptable(WatukuyError):
    """A stored value this cipher cannot read: written with a key not given, or altered.
    Names the key id and the reason, never a key or the value."""

    def __init__(self, message: str, key_id: str | None) -> None:
        self.key_id = key_id
        super().__init__(message)


def key_id(key: bytes) -> str:
    """The public name of ``key``: a record carries it, so a reader knows which key to use."""
    return hashlib.sha256(_ID_CONTEXT + key).hexdigest()[:16]


def parse_key(text: object, path: str) -> bytes:
    """The 32 bytes ``text`` writes (64 hex characters, or base64: standard or URL-safe,
    padded or not). Anything else: a :class:`ConfigError` naming ``path`` and never ``text``."""
    if not isinstance(text, str):
        raise ConfigError(f"{_FORM}, not {type(text).__name__}", path)
    text = text.strip()
    if not text:
        raise ConfigError(f"is empty; it {_FORM}", path)
    if len(text) == 2 * KEY_BYTES and all(c in string.hexdigits for c in text):
        return bytes.fromhex(text)
    # One alphabet for both base64 spellings, then the padding a shortened one lost.
    normal = text.replace("-", "+").replace("_", "/").rstrip("=")
    try:
        key = base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(_FORM, path) from None
    if len(key) != KEY_BYTES:
        raise ConfigError(f"{_FORM}; this is {len(key)} bytes", path)
    return key


def parse_keys(key: object, keys: object, section: str = "credentials") -> list[bytes]:
    """``key`` (one) or ``keys`` (a list, the first writes), exactly one of them given."""
    if key is not None and keys is not None:
        raise ConfigError("give key or keys, not both", section)
    if key is not None:
        return [parse_key(key, f"{section}.key")]
    if keys is None:
        raise ConfigError(
            "is required: the AES-256 key that encrypts stored grants, e.g. "
            '"${env:WATUKUY_CREDENTIALS_KEY}" (or keys: [new, old] to rotate it)',
            f"{section}.key",
        )
    if not isinstance(keys, list) or not keys:
        raise ConfigError("must be a list of keys, the one to write with first", f"{section}.keys")
    parsed: list[bytes] = []
    for index, text in enumerate(keys):
        where = f"{section}.keys[{index}]"
        value = parse_key(text, where)
        if value in parsed:
            raise ConfigError(f"is the same key as {section}.keys[{parsed.index(value)}]", where)
        parsed.append(value)
    return parsed


class Cipher:
    """Encrypts with the first of ``keys``, decrypts with whichever a value names."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("a cipher needs at least one key")
        self._keys = {key_id(k): AESGCM(k) for k in keys}
        self.write_id = key_id(keys[0])

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of its keys, the writing one first."""
        return tuple(self._keys)

    def encrypt(self, plaintext: bytes, aad: bytes) -> tuple[str, bytes]:
        """``(key id, value)`` of ``plaintext`` bound to ``aad``."""
        nonce = os.urandom(NONCE_BYTES)  # random per value: 2**-32 collision odds at 2**32 uses
        sealed = self._keys[self.write_id].encrypt(nonce, plaintext, aad)
        return self.write_id, bytes([VERSION]) + nonce + sealed

    def decrypt(self, kid: str | None, value: bytes, aad: bytes) -> bytes:
        """The plaintext of ``value``; :class:`Undecryptable` saying why it cannot be read."""
        aead = self._keys.get(kid or "")
        if aead is None:
            raise Undecryptable(f"written with a key not given here (key id {kid})", kid)
        if len(value) < 1 + NONCE_BYTES + 16 or value[0] != VERSION:
            raise Undecryptable(f"not an encrypted grant of this release (key id {kid})", kid)
        try:
            return aead.decrypt(value[1 : 1 + NONCE_BYTES], value[1 + NONCE_BYTES :], aad)
        except InvalidTag:
            raise Undecryptable(
                f"fails authentication: altered, or moved from another record (key id {kid})",
                kid,
            ) from None

    def __repr__(self) -> str:
        return f"Cipher(key_ids={list(self._keys)!r})"
