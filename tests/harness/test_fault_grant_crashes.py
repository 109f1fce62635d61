"""The grant-crashes scenario's reading of ``<prefix>.credentials``: which tenants' refreshes a
killed runner claimed and never saved (integration/faults/scenarios/s16_grant_crashes.py)."""

from __future__ import annotations

import json

from integration.faults.scenarios.s16_grant_crashes import lost_in
from integration.faults.topics import Raw


def record(offset: int, key: str, runner: str | None = None) -> Raw:
    value = b"ciphertext" if runner is None else json.dumps({"runner": runner}).encode()
    return Raw("p.credentials", 0, offset, key.encode(), value, ())


def test_a_tenant_is_lost_when_the_first_claim_after_its_last_grant_is_the_killed_runners() -> None:
    records = [
        record(0, "grant/oauth/a"),
        record(1, "claim/oauth/a/0", "r1"),
        record(2, "grant/oauth/a"),  # r1 saved it: settled
        record(3, "claim/oauth/a/1", "r1"),  # r1 claimed, then died: lost
        record(4, "claim/oauth/a/1", "r2"),  # r2's claim came second: it waits
        record(5, "grant/oauth/b"),
        record(6, "claim/oauth/b/0", "r2"),  # r2 refreshes b
        record(7, "claim/oauth/b/0", "r1"),  # r1's came second: not its refresh
        record(8, "grant/oauth/c"),
        record(9, "claim/oauth/c/0", "r1"),
        record(10, "grant/oauth/c"),  # lost and settled before: not this kill's
        record(11, "claim/other/d/0", "r1"),  # another connector
    ]
    assert lost_in(records, "r1") == {"a"}
    assert lost_in(records, "r2") == {"b"}
