"""The vendor of the idle-tenants benchmark, in a process of its own so its CPU is not the
engine's: ``python -m integration.bench.idle_vendor --tenants N`` prints one JSON line (the base
URL and the tenants) and serves until SIGTERM.

:class:`IndexedSimulator` is the :class:`VendorSimulator` with an O(1) tenant lookup by slug;
the stock one scans every tenant twice per request (about 1 ms per request at 10,000 tenants).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
from typing import Any

from integration.simulator import Tenant, VendorSimulator, running_simulator


class IndexedSimulator(VendorSimulator):
    """The vendor simulator with an O(1) tenant lookup by slug (the stock one scans)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._by_slug: dict[str, Tenant] = {}
        super().__init__(*args, **kwargs)

    def tenant_by_slug(self, slug: str) -> Tenant | None:
        return self._by_slug.get(slug)

    def add_tenant(self, slug: str | None = None, items: int | None = None) -> Tenant:
        tenant = super().add_tenant(slug, items)
        self._by_slug[tenant.slug] = tenant
        return tenant

    def remove_tenant(self, tenant_id: str) -> None:
        slug = self.tenant(tenant_id).slug
        super().remove_tenant(tenant_id)
        self._by_slug.pop(slug, None)


async def serve_vendor(tenants: int) -> None:
    """What ``python -m integration.simulator`` does, indexed."""
    sim = IndexedSimulator(tenants, 3, quota=10**9)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with running_simulator(sim, "127.0.0.1", 0) as base_url:
        listed = [tenant.to_json() for tenant in sim.tenants]
        print(json.dumps({"base_url": base_url, "tenants": listed}), flush=True)
        await stop.wait()


def start_simulator(tenants: int, vendor: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """The vendor process (``indexed`` or ``stock``) and what it printed when ready."""
    if vendor == "stock":
        command = [sys.executable, "-m", "integration.simulator", "--tenants", str(tenants)]
        command += ["--items", "3", "--port", "0", "--quota", str(10**9)]
    else:
        command = [sys.executable, "-m", "integration.bench.idle_vendor"]
        command += ["--tenants", str(tenants)]
    sim = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert sim.stdout is not None
    line = sim.stdout.readline()
    if not line:
        sim.kill()
        raise RuntimeError(f"the simulator exited ({sim.wait()}) before printing its address")
    return sim, json.loads(line)


def stop_simulator(sim: subprocess.Popen[str]) -> None:
    sim.terminate()
    try:
        sim.wait(timeout=10)
    except subprocess.TimeoutExpired:
        sim.kill()
        sim.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.bench.idle_vendor")
    parser.add_argument("--tenants", type=int, required=True)
    asyncio.run(serve_vendor(parser.parse_args(argv).tenants))
    return 0


if __name__ == "__main__":
    sys.exit(main())
