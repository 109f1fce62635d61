"""The keys of ``transform``, as data (see :mod:`watukuy.options.declarative`)."""

from __future__ import annotations

from watukuy.options.keydoc import KeyDoc

__all__ = ["transform_keys"]


def transform_keys(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "What is published of each item; the steps run in the order below, whatever "
            "order they are written in. Paths are dotted keys (`reporter.email`). A changed "
            "transform reshapes only items polled from then on: `validate` warns when it "
            "differs from the one the poller last published with; `replay` republishes "
            "history.",
        ),
        KeyDoc(
            f"{prefix}.filter",
            "mapping",
            None,
            "Publish only matching items: `{path, equals|in|exists|matches: value}`, "
            "`{all: [...]}`, `{any: [...]}`, `{not: ...}`. An item that stops matching is "
            "published once as `deleted`.",
        ),
        KeyDoc(f"{prefix}.select", "list", None, "Keep only these paths, where they are nested."),
        KeyDoc(f"{prefix}.drop", "list", None, "Remove these paths."),
        KeyDoc(f"{prefix}.rename", "mapping", None, "Source path -> target path."),
        KeyDoc(
            f"{prefix}.mask",
            "mapping",
            None,
            "Path -> `{hmac: ${env:KEY}}` (lowercase hex HMAC-SHA256; the key must be a "
            "secret reference) or `{redact: TEXT}`.",
        ),
        KeyDoc(
            f"{prefix}.set",
            "mapping",
            None,
            "Key -> literal or template over `{partition.key}`, `{parent.key}`, `{item.PATH}` "
            "(never `{partition.data...}`).",
        ),
    ]
