"""The demo's second connector: ``config/tracker.yaml``, a tracker's projects, their issues
(a child stream), those issues' comments (a grandchild) and the users, with e-mails hashed and
internal notes dropped before Kafka.

Both runners run it beside the invoices poller. At the end the demo reads each stream's events
the way a user would (``watukuy-source tail --no-follow``) and says, per stream, how many events
over how many partitions, and whether any e-mail or internal note reached Kafka in the clear.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from integration.demo_pieces import ROOT

TRACKER = ROOT / "config" / "tracker.yaml"
CONNECTOR = "tracker"
PII_KEY = "demo-pii-key"  # the HMAC key of the demo's masks (WATUKUY_PII_KEY)
HOOK_SECRET = "demo-hook-secret"  # what signs the tracker's webhooks (TRACKER_HOOK_SECRET)


def tracker_entry(schedule: Mapping[str, str]) -> dict[str, Any]:
    """``config/tracker.yaml``'s connector, polled on the demo's schedule."""
    entry: dict[str, Any] = yaml.safe_load(TRACKER.read_text())["pollers"][0]
    entry["defaults"]["schedule"] = dict(schedule)
    entry["defaults"].pop("budget", None)  # the demo's runner config has its own budgets
    return entry


def stream_names(entry: Mapping[str, Any]) -> list[str]:
    return [f"{CONNECTOR}.{stream['name']}" for stream in entry["streams"]]


@dataclass(frozen=True)
class StreamSeen:
    poller: str
    events: int
    partitions: set[str]
    clear_pii: int
    """Events whose data holds an e-mail address or an internal note in the clear."""

    def line(self) -> str:
        deepest = max((key.count("/") for key in self.partitions), default=0)
        keys = f"{len(self.partitions)} partition(s)"
        if deepest:
            keys += f", keys like {sorted(self.partitions, key=len)[-1]}"
        pii = "no e-mail or note in the clear" if not self.clear_pii else "PII IN THE CLEAR"
        return f"{self.poller}: {self.events} events over {keys}; {pii}"


def read_stream(config: Path, poller: str, env: Mapping[str, str]) -> StreamSeen:
    """``watukuy-source tail --from-beginning --no-follow`` of one stream."""
    command = ["tail", "--config", str(config), "--poller", poller]
    done = subprocess.run(
        [sys.executable, "-m", "watukuy.cli", *command, "--from-beginning", "--no-follow"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env),
        check=False,
    )
    events, clear, partitions = 0, 0, set[str]()
    for line in done.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        events += 1
        partitions.add(str(event.get("partition")))
        text = json.dumps(event.get("data"))
        clear += "@" in text or "internal_note" in text
    return StreamSeen(poller, events, partitions, clear)
