"""The JSON values of the control topics (``<prefix>.configs`` and ``<prefix>.status``): one
object with a ``format_version``; a value that is not one, or was written by a newer release,
is refused rather than half read."""

from __future__ import annotations

import json
from typing import Any

from watukuy.core.errors import StateCorrupted


def json_record(raw: bytes, what: str, newest: int) -> dict[str, Any]:
    """``raw`` as an object; ``what`` names it in errors (``status record of key t/a``)."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise StateCorrupted(f"unreadable {what}: not JSON") from None
    if not isinstance(value, dict):
        raise StateCorrupted(f"unreadable {what}: not a JSON object")
    version = value.get("format_version")
    if not isinstance(version, int) or version > newest:
        raise StateCorrupted(
            f"unreadable {what}: format_version {version!r} is newer than "
            f"{newest} (written by a newer release)"
        )
    return value
