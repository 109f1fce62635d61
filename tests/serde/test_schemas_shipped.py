"""The Avro schemas live in the top-level ``schemas/``; the wheel ships exactly those files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"


def source_schemas() -> dict[str, bytes]:
    return {
        path.relative_to(SCHEMAS).as_posix(): path.read_bytes()
        for path in sorted(SCHEMAS.rglob("*.avsc"))
    }


def test_the_package_reads_the_top_level_schemas() -> None:
    packaged = resources.files("watukuy.serde").joinpath("schemas")
    for name, text in source_schemas().items():
        assert packaged.joinpath(*name.split("/")).read_bytes() == text, name


def test_the_wheel_ships_every_schema_unchanged(tmp_path: Path) -> None:
    tree = tmp_path / "src"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, tree / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO / "connector", tree / "connector", symlinks=True, ignore=ignore)
    shutil.copytree(SCHEMAS, tree / "schemas")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), "."],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("watukuy-*.whl")
    prefix = "watukuy/serde/schemas/"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            name.removeprefix(prefix): archive.read(name)
            for name in archive.namelist()
            if name.startswith(prefix) and name.endswith(".avsc")
        }
    assert shipped == source_schemas()
