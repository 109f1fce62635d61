"""Poisoned items: which items a ``poison_rate`` picks, and how each kind is served.

An item is picked by a digest of its tenant and id, not by a random draw per request, so every
time it is served (a retried page, a later version) it is poisoned the same way: the runner
must park it once per version, not once per attempt. Nothing here does I/O or keeps state.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from .records import COLLECTIONS, Collection, Faults, Item


def poison_kind(tenant_id: str, item: Item, faults: Faults) -> str | None:
    """The kind of poison ``item`` is served as under ``faults``, or None when it is intact."""
    if faults.drop_id:
        return "malformed"
    if faults.poison_rate <= 0.0:
        return None
    digest = hashlib.sha256(f"{tenant_id}/{item.id}".encode()).digest()
    share = int.from_bytes(digest[:8], "big") / 2**64
    if share >= faults.poison_rate:
        return None
    kinds = faults.poison_kinds
    return kinds[int.from_bytes(digest[8:12], "big") % len(kinds)]


def poisoned(
    item: Item, kind: str, size: int, where: Collection = COLLECTIONS["items"]
) -> dict[str, Any]:
    """The JSON of ``item`` of collection ``where`` served as poison of ``kind``.

    - ``malformed``: no ``id`` (the identity the pollers read is missing);
    - ``schema``: an item's ``amount`` is text, which the invoice schema's ``double`` refuses;
      any other record's ``updated_at`` is a number, which a ``string`` field refuses;
    - ``oversized``: the collection's text field (an item's ``name``, an issue's ``title``...)
      carries ``size`` more characters, a valid but huge record;
    - ``oversized_malformed``: both huge and without ``id``.
    The ``etag`` is always there: it is how a test finds the record in the dead letters.
    """
    body = item.to_json()
    if kind in ("oversized", "oversized_malformed"):
        # Incompressible text, so no codec between here and the broker can shrink it back.
        noise = random.Random(f"{item.id}/{item.etag}").randbytes((size + 1) // 2).hex()
        body[where.text_field] = f"{body.get(where.text_field)} {noise[:size]}"
    if kind in ("malformed", "oversized_malformed"):
        del body["id"]
    if kind == "schema" and where.name == "items":
        body["amount"] = f"{body.get('amount')} {body.get('currency')}"
    elif kind == "schema":
        body["updated_at"] = item.stamp
    return body
