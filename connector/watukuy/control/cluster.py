"""What ``GET /`` says beside the version, as Connect's ``ServerInfo`` does: the commit the
running code was built from, and the id of the Kafka cluster the runner uses.

The commit comes from ``WATUKUY_COMMIT`` (the Docker image sets it from a build argument),
else from the git checkout the package runs from (an editable install), else ``unknown``:
an installed wheel carries no history. The cluster id is asked of Kafka once, on the first
request that needs it, and kept; while Kafka cannot be reached it is ``None`` and asked again
next time.
"""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from watukuy.store.kafka.clients import admin_client

__all__ = ["ClusterId", "build_commit"]

PACKAGE = Path(__file__).resolve().parents[1]
DESCRIBE_TIMEOUT = 5.0


@functools.cache
def build_commit() -> str:
    given = os.environ.get("WATUKUY_COMMIT", "").strip()
    return given or _checkout_commit() or "unknown"


def _checkout_commit() -> str | None:
    """HEAD of the checkout holding this package, when it is watukuy's own (not a repository
    that merely contains a virtualenv with watukuy installed in it)."""
    try:
        top = _git("rev-parse", "--show-toplevel")
        if top is None or Path(top, "connector", "watukuy").resolve() != PACKAGE:
            return None
        return _git("rev-parse", "HEAD")
    except OSError:  # no git on this machine
        return None


def _git(*args: str) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(PACKAGE), *args], capture_output=True, text=True, timeout=5, check=False
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


class ClusterId:
    """The Kafka cluster id, asked of the cluster once."""

    def __init__(self, kafka: Mapping[str, Any]) -> None:
        self._kafka = dict(kafka)
        self._id: str | None = None

    async def get(self) -> str | None:
        if self._id is None:
            self._id = await asyncio.to_thread(self._describe)
        return self._id

    def _describe(self) -> str | None:
        admin = admin_client(self._kafka)  # held until the answer: a freed client fails it
        try:
            cluster_id = (
                admin.describe_cluster(request_timeout=DESCRIBE_TIMEOUT).result().cluster_id
            )
        except KafkaException:
            return None
        return cluster_id if isinstance(cluster_id, str) and cluster_id else None
