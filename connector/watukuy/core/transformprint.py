"""A transform's fingerprint: whether what a poller publishes of an item changed since the
last run that published.

A transform changed between runs only reshapes (masks, drops...) the items polled from then
on; what was published before stays as it was until a ``replay``. ``validate`` compares the
fingerprint of the config at hand with the one the last publishing run recorded in the status
topic and says so (issue 23).

The fingerprint is a hash of the transform's canonical spec (JSON with sorted keys; the steps'
written order does not matter, as it does not for the result). An HMAC key is never part of
it, not even hashed alone: its place holds HMAC-SHA256(key, :data:`LABEL`), so a rotated key
changes the fingerprint while the fingerprint says nothing about the key. Pure.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from watukuy.core.events import canonical_json

__all__ = ["LABEL", "transform_fingerprint"]

LABEL = b"watukuy transform fingerprint"
"""What an HMAC key signs to stand for itself in a fingerprint."""


def transform_fingerprint(spec: Mapping[str, Any] | None) -> str | None:
    """The fingerprint of a checked ``transform:`` mapping (HMAC keys resolved: the key
    itself, text or bytes); ``None`` for no transform or one without a step, which publishes
    the vendor's item as it is."""
    if spec is None:
        return None
    canonical = {step: given for step, given in spec.items() if given not in (None, [], {})}
    mask = canonical.get("mask")
    if isinstance(mask, Mapping):
        canonical["mask"] = {path: _keyless(how) for path, how in mask.items()}
    if not canonical:
        return None
    return hashlib.sha256(canonical_json(canonical).encode()).hexdigest()[:32]


def _keyless(how: Any) -> Any:
    """A mask's spec with its HMAC key replaced by the key's signature of :data:`LABEL`."""
    if not isinstance(how, Mapping) or "hmac" not in how:
        return how
    key = how["hmac"]
    raw = key if isinstance(key, bytes) else str(key).encode()
    return {**how, "hmac": {"signs": hmac.new(raw, LABEL, hashlib.sha256).hexdigest()}}
