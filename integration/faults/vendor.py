"""The vendor simulator as a process of its own, a client of its admin API, and a mutator.

The simulator (``python -m integration.simulator``) is started with a huge quota and no
mutations of its own: the scenario changes items through :class:`Mutator` (updates and creates,
never deletions, which the token cursor cannot see), so every served version must end up as
exactly one event. Ground truth comes from ``GET /_admin/tenants/{id}/served``.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class AdminError(RuntimeError):
    """The simulator's admin API refused a request (the message holds its answer)."""


@dataclass
class Simulator:
    process: subprocess.Popen[str]
    base_url: str
    initial: list[str]
    _known: dict[str, None] = field(default_factory=dict)  # every tenant id ever seen, ordered
    removed: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._known.update(dict.fromkeys(self.initial))

    # -- admin API ---------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            answer = exc.read().decode(errors="replace")[:300]
            raise AdminError(f"{method} {path} -> {exc.code}: {answer}") from None
        return json.loads(text) if text else None

    def tenants(self) -> list[str]:
        """The live tenants' ids, as the pollers list them."""
        ids = [t["id"] for t in self.call("GET", "/tenants")["tenants"]]
        self._known.update(dict.fromkeys(ids))
        return ids

    def known_tenants(self) -> list[str]:
        """Every tenant id this simulator ever had, removed ones included."""
        self.tenants()
        return list(self._known)

    def items(self, tenant: str) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = self.call("GET", f"/_admin/tenants/{tenant}/items")["data"]
        return data

    def final_versions(self) -> dict[str, dict[str, str]]:
        """``{tenant: {item id: etag}}`` of every live tenant now."""
        return {t: {i["id"]: i["etag"] for i in self.items(t)} for t in self.tenants()}

    def served(self, tenant: str) -> list[tuple[str, str]]:
        """Every ``(id, version)`` served intact to a poll, in first-served order."""
        return [
            (s["id"], s["version"]) for s in self.call("GET", f"/_admin/tenants/{tenant}/served")
        ]

    def poisoned(self, tenant: str) -> list[tuple[str, str]]:
        """Every ``(id, version)`` served poisoned (no event: one dead letter each)."""
        answer = self.call("GET", f"/_admin/tenants/{tenant}/poisoned")
        return [(p["id"], p["version"]) for p in answer]

    def log(self, tenant: str) -> list[dict[str, Any]]:
        """Every API request of ``tenant`` as the vendor saw it: ``path``, ``query``,
        ``status``."""
        entries: list[dict[str, Any]] = self.call("GET", f"/_admin/tenants/{tenant}/log")
        return entries

    def update_item(self, tenant: str, item: str, **fields: Any) -> dict[str, Any]:
        updated: dict[str, Any] = self.call(
            "PATCH", f"/_admin/tenants/{tenant}/items/{item}", fields
        )
        return updated

    def create_item(self, tenant: str, **fields: Any) -> dict[str, Any]:
        created: dict[str, Any] = self.call("POST", f"/_admin/tenants/{tenant}/items", fields)
        return created

    def add_tenant(self, items: int | None = None) -> str:
        body = {} if items is None else {"items": items}
        tenant: str = self.call("POST", "/_admin/tenants", body)["id"]
        self._known[tenant] = None
        return tenant

    def remove_tenant(self, tenant: str) -> None:
        self.call("DELETE", f"/_admin/tenants/{tenant}")
        self.removed.add(tenant)

    def set_faults(self, tenant: str, **faults: Any) -> dict[str, Any]:
        set_to: dict[str, Any] = self.call("POST", f"/_admin/tenants/{tenant}/faults", faults)
        return set_to

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_simulator(*options: str, log: Path | None = None) -> Simulator:
    """``python -m integration.simulator OPTIONS --port 0``; waits for its address line."""
    command = [sys.executable, "-m", "integration.simulator", *options, "--port", "0"]
    with open(log or os.devnull, "ab") as stderr:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline() if ready else ""
    if not line:
        process.kill()
        process.wait(10)
        raise RuntimeError(f"the vendor simulator did not print its address; see {log}")
    info = json.loads(line)
    return Simulator(process, info["base_url"], [t["id"] for t in info["tenants"]])


class Mutator:
    """A thread changing items all along: mostly updates, some creates, never deletions.

    ``every`` seconds between changes; ``tenants`` limits which tenants change (default: the
    live ones at start). Stop it before the runners must catch up.
    """

    def __init__(
        self,
        sim: Simulator,
        *,
        every: float = 0.02,
        tenants: list[str] | None = None,
        seed: int = 5,
    ) -> None:
        self.sim = sim
        self.every = every
        self.rng = random.Random(seed)
        self.tenants = tenants if tenants is not None else sim.tenants()
        self.ids = {t: [i["id"] for i in sim.items(t)] for t in self.tenants}
        self.changes = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mutator", daemon=True)

    def start(self) -> Mutator:
        self._thread.start()
        return self

    def stop(self) -> int:
        """Stop changing; how many changes were made."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        return self.changes

    def __enter__(self) -> Mutator:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            tenant = self.rng.choice(self.tenants)
            try:
                if self.ids[tenant] and self.rng.random() < 0.85:
                    item = self.rng.choice(self.ids[tenant])
                    self.sim.update_item(tenant, item, amount=round(self.rng.uniform(1, 999), 2))
                else:
                    self.ids[tenant].append(self.sim.create_item(tenant)["id"])
                self.changes += 1
            except (AdminError, OSError) as exc:  # a removed tenant, a busy machine: go on
                if len(self.errors) < 10:
                    self.errors.append(str(exc))
