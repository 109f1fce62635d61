"""The import graph keeps the layers of docs/architecture.md: every import points down, siblings
of one layer do not import each other, and nothing inside the package imports its root.

The contracts live in pyproject.toml (``[tool.importlinter]``); import-linter's graph (grimp)
holds the imports inside functions too, so a lazy import cannot hide an upward arrow.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from importlinter.cli import lint_imports  # a dev extra: make setup installs it

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_graph_keeps_the_layer_contracts(capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True
    )
    report = capsys.readouterr().out
    assert exit_code == 0, report
