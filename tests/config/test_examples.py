"""Every config in ``config/`` passes ``watukuy-source validate`` as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "config").glob("*.yaml"))


def test_there_are_examples_of_each_kind() -> None:
    names = {path.name for path in CONFIGS}
    assert {"invoices.yaml", "python.yaml", "shared-budget.yaml"} <= names


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_example_passes_validate(config: Path, tmp_path: Path) -> None:
    env = dict(os.environ, WATUKUY_VENDOR_URL="http://127.0.0.1:8099", WATUKUY_PII_KEY="k")
    env |= {"TRACKER_HOOK_SECRET": "k"}  # tracker.yaml's webhook signatures (issue 46)
    env |= {  # oauth.yaml's client and credential store key (32 bytes, base64)
        "WATUKUY_OAUTH_CLIENT_ID": "watukuy-simulator",
        "WATUKUY_OAUTH_CLIENT_SECRET": "simulator-client-secret",
        "WATUKUY_CREDENTIALS_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    }
    env.pop("PYTHONPATH", None)  # python.yaml finds its poller through its own python_path
    checked = subprocess.run(
        [sys.executable, "-m", "watukuy.cli", "validate", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # relative paths in the config resolve against the file, not the cwd
        env=env,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.strip().endswith("is valid")
