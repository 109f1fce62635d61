"""The Singer peer of the side-by-side benchmark: ``tap-rest-api-msdk | target-kafka``.

Both come from PyPI, each into a virtualenv of its own under ``.watukuy/bench/venvs`` (their
``singer-sdk`` pins conflict), kept between runs. Nothing of theirs is changed: this module only
installs them and writes their configs. The tap takes one bearer token, so a tenant is one
pipeline (one tap process piped into one target process).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAP = "tap-rest-api-msdk"
TARGET = "target-kafka"
TAP_SPEC = f"{TAP}==1.4.2"
TARGET_SPEC = f"{TARGET}==0.1.3"
STREAM = "invoices"


class SingerUnavailable(Exception):
    """The peer could not be installed here; the message says why, in one line."""


@dataclass(frozen=True)
class Installed:
    tap: Path
    target: Path
    tap_version: str
    target_version: str


def venv_tool(root: Path, name: str, spec: str, timeout: float = 600) -> tuple[Path, str]:
    """``root/name`` with ``spec`` installed (once: a marker holds the spec it was made with);
    the path of its ``name`` executable and the installed version."""
    home = root / name
    exe = home / "bin" / name
    marker = home / "installed-spec"
    if not (exe.exists() and marker.exists() and marker.read_text() == spec):
        home.parent.mkdir(parents=True, exist_ok=True)
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(home)],
            [str(home / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", spec],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise SingerUnavailable(f"installing {spec} took over {timeout:.0f}s") from None
            if done.returncode != 0:
                lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
                last = lines[-1].strip() if lines else f"exit code {done.returncode}"
                raise SingerUnavailable(f"pip could not install {spec}: {last}")
        marker.write_text(spec)
    version = subprocess.run(
        [
            str(home / "bin" / "python"),
            "-c",
            f"import importlib.metadata as m; print(m.version({name!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    return exe, version or "?"


def install(
    root: Path, tap_spec: str = TAP_SPEC, target_spec: str = TARGET_SPEC, timeout: float = 600
) -> Installed:
    """Both virtualenvs, made or reused; :class:`SingerUnavailable` if pip fails."""
    tap, tap_version = venv_tool(root, TAP, tap_spec, timeout)
    target, target_version = venv_tool(root, TARGET, target_spec, timeout)
    return Installed(tap, target, tap_version, target_version)


def tap_config(base_url: str, tenant: dict[str, str], page: int) -> dict[str, Any]:
    """One tenant's tap: ``GET {base}/{slug}/items?limit=page&cursor=<$.next>`` with its bearer
    token, the records in ``$.data``, keyed by ``id`` (settings from the tap's ``--about``)."""
    return {
        "api_url": base_url,
        "auth_method": "bearer_token",
        "bearer_token": tenant["token"],
        "pagination_request_style": "jsonpath_paginator",
        "next_page_token_path": "$.next",
        "pagination_response_style": "page",
        "pagination_next_page_param": "cursor",
        "params": {"limit": page},
        "streams": [
            {
                "name": STREAM,
                "path": f"/{tenant['slug']}/items",
                "records_path": "$.data[*]",
                "primary_keys": ["id"],
            }
        ],
    }


def target_config(bootstrap: str, topic_prefix: str) -> dict[str, Any]:
    """The target writes stream ``invoices`` to ``<topic_prefix>invoices``, keyed by ``id``.

    Its other settings keep their defaults (snappy compression, batches of 100): what a user
    gets. ``compression_type: none`` is refused by its kafka-python, so snappy it is.
    """
    return {"bootstrap_servers": bootstrap, "topic_prefix": topic_prefix, "key_properties": ["id"]}
