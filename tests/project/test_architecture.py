"""The import graph keeps the layers of docs/architecture.md: every import points down, siblings
of one layer do not import each other, and nothing inside the package imports its root.

The contracts live in pyproject.toml (``[tool.importlinter]``); import-linter's graph (grimp)
holds the imports inside functions too, so a lazy import cannot hide an upward arrow.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

# In a process of its own: import-linter reconfigures logging, which other tests capture.
LINT = (
    "import sys\n"
    "from importlinter.cli import lint_imports\n"  # a dev extra: make setup installs it
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))\n"
)


def test_the_import_graph_keeps_the_layer_contracts() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LINT, str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
