"""The README's examples hold: its Python poller runs as written against the vendor simulator it
names, and its YAML poller passes ``watukuy-source validate``."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from integration.simulator import VendorSimulator, running_simulator

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def readme_block(language: str) -> str:
    """The first fenced block of ``language`` in the README."""
    block = re.compile(rf"^```{language}\n(.*?)^```", re.S | re.M)
    found = block.search((REPO / "README.md").read_text(encoding="utf-8"))
    assert found, f"the README's {language} example is missing"
    return found.group(1)


def readme_python() -> str:
    return readme_block("python")


def test_the_readme_shows_the_python_api() -> None:
    code = readme_python()
    for name in ("define_poller", "Engine", "MemoryStore"):
        assert name in code, name


async def test_the_readme_python_example_prints_every_tenants_events() -> None:
    sim = VendorSimulator(tenants=2, items_per_tenant=5, seed=1)
    async with running_simulator(sim) as base_url:
        # A process of its own, as a reader would run it: the example calls asyncio.run().
        env = dict(os.environ, WATUKUY_VENDOR_URL=base_url)
        example = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            readme_python(),
            env=env,
            cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(example.communicate(), timeout=60)
    assert example.returncode == 0, err.decode()[-2000:]
    lines = [line.split() for line in out.decode().splitlines()]
    for tenant in sim.tenants:
        shown = [(seq, kind) for partition, seq, kind, _ in lines if partition == tenant.id]
        assert shown == [(str(n), "created") for n in range(1, 6)], tenant.id


def test_the_readme_yaml_poller_passes_validate(tmp_path: Path) -> None:
    pollers = yaml.safe_load(readme_block("yaml"))["pollers"]
    config = {"kafka": {"bootstrap.servers": "127.0.0.1:9092"}, "pollers": pollers}
    path = tmp_path / "readme.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = dict(os.environ, WATUKUY_VENDOR_URL="http://127.0.0.1:8099")
    checked = subprocess.run(
        [sys.executable, "-m", "watukuy.cli", "validate", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.strip().endswith("is valid")
