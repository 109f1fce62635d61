"""Checking the ``Authorization`` header against ``rest.auth``, in constant time.

Both sides are hashed before ``hmac.compare_digest`` (which leaks lengths, not contents) and
every configured credential is compared, so the time taken says neither which credential came
close nor how long any is. A credential is never logged or echoed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from watukuy.config.model import RestAuth

REALM = "watukuy"


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


class Credentials:
    """The bearer tokens and basic users of ``rest.auth``, as digests."""

    def __init__(self, auth: RestAuth) -> None:
        self._tokens = [_digest(token.encode("utf-8")) for token in auth.tokens]
        self._basic = [_digest(f"{user}:{pw}".encode()) for user, pw in auth.basic]

    def challenges(self) -> list[str]:
        """``WWW-Authenticate`` values, one per scheme accepted."""
        out = []
        if self._tokens:
            out.append(f'Bearer realm="{REALM}"')
        if self._basic:
            out.append(f'Basic realm="{REALM}", charset="UTF-8"')
        return out

    def usage(self) -> str:
        schemes = []
        if self._tokens:
            schemes.append("Authorization: Bearer <token>")
        if self._basic:
            schemes.append("Authorization: Basic <user:password in base64>")
        return " or ".join(schemes)

    def accepts(self, header: str | None) -> bool:
        """Whether ``header`` (the ``Authorization`` value) carries a configured credential."""
        if not header:
            return False
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer":
            return _any_equal(_digest(value.encode("utf-8")), self._tokens)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(value.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError):
                return False
            return _any_equal(_digest(pair), self._basic)
        return False


def _any_equal(given: bytes, known: list[bytes]) -> bool:
    found = False
    for candidate in known:
        found |= hmac.compare_digest(given, candidate)
    return found
