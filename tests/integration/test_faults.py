"""The fault suite's short profile (issue 14): every scenario of ``integration.faults`` once,
each on its own topics prefix, simulator and runners, checked by the verifier against what the
vendor served. ``python -m integration.faults --profile full`` runs the long version."""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import pytest

from integration.faults.harness import FaultContext
from integration.faults.report import table
from integration.faults.scenarios import SCENARIOS

# A scenario with ``IN_CI = False`` runs only from ``python -m integration.faults``: CI is near
# its time limit (docs/testing.md says which, and why).
IN_CI = [m for m in SCENARIOS if getattr(m, "IN_CI", True)]


@pytest.mark.parametrize("scenario", IN_CI, ids=[m.NAME for m in IN_CI])
def test_short_profile(scenario: ModuleType, kafka_bootstrap: str, tmp_path: Path) -> None:
    began = time.monotonic()
    with FaultContext(kafka_bootstrap, tmp_path) as ctx:
        result = scenario.run(ctx, "short")
    result.seconds = time.monotonic() - began
    shown = table([result])
    assert result.scenario == scenario.NAME
    assert result.duplicates == 0, shown
    assert result.losses == 0, shown
    assert result.ok, shown
    assert result.events_verified > 0, shown
