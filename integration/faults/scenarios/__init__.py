"""The scenarios, in the order the table lists them. Each module exports ``NAME`` and
``run(ctx: FaultContext, profile: str) -> Result`` (short profile <= 30 s, full <= 5 min); a
module with ``IN_CI = False`` is left out of CI's short profile (``tests/integration/
test_faults.py``). Add one import and one list entry per module."""

from __future__ import annotations

from types import ModuleType

from integration.faults.scenarios import (
    s01_rolling_bounces,
    s02_crash_points,
    s03_zombie,
    s04_broker,
    s05_churn,
    s06_cold_restart,
    s07_poison,
    s08_vendor_faults,
    s09_rest_fire,
    s10_secrets,
    s11_upgrade,
    s12_cluster,
    s13_local_state,
    s14_unowned,
    s15_backfill,
    s16_grant_crashes,
)

SCENARIOS: list[ModuleType] = [
    s01_rolling_bounces,
    s02_crash_points,
    s03_zombie,
    s04_broker,
    s05_churn,
    s06_cold_restart,
    s07_poison,
    s08_vendor_faults,
    s09_rest_fire,
    s10_secrets,
    s11_upgrade,
    s12_cluster,  # on a three-node cluster of its own
    s13_local_state,
    s14_unowned,
    s15_backfill,
    s16_grant_crashes,
]
