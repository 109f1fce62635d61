"""Tenants whose partition data is made of canaries, polled in every way a poll can fail.

Partition ``data`` must never be persisted or logged. To prove it, each tenant's data holds
unique strings (a slug that is in the URL path, a host name that is the URL's host, an
account id sent as a query parameter, a bearer token sent as a header) and the tests look
for every one of them wherever watukuy writes: ``last_error``, ``inspect()``, state values,
parked items, log records, its own exceptions, and (on the broker) every record under the
run's prefix.

The tenants break in different ways against the vendor simulator: a 500 (named by a URL
template), a timeout, malformed JSON, a 404 (an unknown slug: the vendor echoes it in the
body), a 401 (a wrong token), a refused connection, and a healthy one whose handler fails.
The ``fetch`` is deliberately careless: for a status >= 400 it raises an error that quotes
the URL, the token and the vendor's body, as real user code does.

Host names ``*.vendor.test`` reach the simulator through :class:`TenantHosts`, a transport
that resolves them the way ``/etc/hosts`` would, so the rendered URL really carries the host.
"""

from __future__ import annotations

import dataclasses
import secrets
import socket
from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from integration.simulator import VendorSimulator
from watukuy import Event, Poller, define_poller
from watukuy.http import AiohttpTransport, HttpClient, RawResponse, Request
from watukuy.http.errors import ERRORS as HTTP_ERRORS

TEMPLATE = "http://{partition.data.host}/{partition.data.slug}/items"
POLLER = "canary"
FETCH_TIMEOUT = 0.3
FAULTS = ("5xx", "timeout", "malformed", "404", "401", "refused", "handler")


def closed_port() -> int:
    """A local port nothing listens on (bound then released), so connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class TenantHosts:
    """A transport resolving ``*.vendor.test`` to the simulator (``down-*`` to a closed port).

    The answer keeps the URL as requested, as a real resolver would leave it.
    """

    def __init__(self, simulator_url: str) -> None:
        self._simulator = URL(simulator_url)
        self._refused = closed_port()
        self._inner = AiohttpTransport()

    async def send(self, request: Request) -> RawResponse:
        host = request.url.host or ""
        url = request.url
        if host.endswith(".vendor.test"):
            port = self._refused if host.startswith("down-") else self._simulator.port
            url = url.with_host("127.0.0.1").with_port(port)
        raw = await self._inner.send(dataclasses.replace(request, url=url))
        return dataclasses.replace(raw, url=str(request.url))

    async def close(self) -> None:
        await self._inner.close()

    def reopen(self) -> None:
        self._inner.reopen()


@dataclass
class CanaryTenant:
    key: str
    fault: str
    data: dict[str, Any]


@dataclass
class Scenario:
    sim: VendorSimulator
    simulator_url: str
    tenants: list[CanaryTenant] = field(default_factory=list)
    raised: list[BaseException] = field(default_factory=list)
    """watukuy's own HTTP exceptions the fetch saw."""
    partitions_error: bool = False

    @classmethod
    def build(cls, sim: VendorSimulator, simulator_url: str) -> Scenario:
        scenario = cls(sim, simulator_url)
        for index, fault in enumerate(FAULTS):
            mark = secrets.token_hex(4)
            slug = f"cnry-slug-{index}-{mark}"
            token = f"tok_cnry_{index}_{secrets.token_hex(8)}"
            if fault != "404":  # an unknown slug is the 404
                added = sim.add_tenant(slug=slug, items=3)
                token = token if fault == "401" else added.token  # a wrong token is the 401
            prefix = "down-" if fault == "refused" else ""
            data = {
                "slug": slug,
                "host": f"{prefix}cnry-host-{index}-{mark}.vendor.test",
                "account": f"cnry-acct-{index}-{mark}",
                "token": token,
                "templated": fault in ("5xx", "malformed"),
            }
            tenant_id = sim.tenant_by_slug(slug)
            key = tenant_id.id if tenant_id is not None else f"t_gone_{index}"
            scenario.tenants.append(CanaryTenant(key=key, fault=fault, data=data))
            if tenant_id is not None:
                faults = sim.faults(tenant_id.id)
                faults.error_rate = 1.0 if fault == "5xx" else 0.0
                faults.fail_status = 500
                faults.delay = FETCH_TIMEOUT * 4 if fault == "timeout" else 0.0
                faults.malformed_json = fault == "malformed"
        return scenario

    # -- what a test looks for --------------------------------------------------------------

    @property
    def canaries(self) -> list[str]:
        """Every string value of every tenant's data."""
        return [v for t in self.tenants for v in t.data.values() if isinstance(v, str)]

    def found_in(self, blob: str | bytes) -> list[str]:
        text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
        lowered = text.lower()
        return [c for c in self.canaries if c.lower() in lowered]

    def tenant(self, fault: str) -> CanaryTenant:
        (found,) = [t for t in self.tenants if t.fault == fault]
        return found

    # -- the poller -------------------------------------------------------------------------

    def partitions(self) -> list[dict[str, Any]]:
        if self.partitions_error:
            # A tenants database that fails quoting a row, as drivers do.
            raise RuntimeError(f"tenant db failed on row {self.tenants[0].data}")
        return [{"key": t.key, "data": t.data} for t in self.tenants]

    async def fetch(self, ctx: Any) -> dict[str, Any]:
        data = ctx.partition.data
        url = f"http://{data['host']}/{data['slug']}/items"
        try:
            response = await ctx.http.get(
                url,
                query={"cursor": ctx.cursor.value, "limit": 50, "account": data["account"]},
                headers={"Authorization": f"Bearer {data['token']}"},
                template=TEMPLATE if data["templated"] else None,
            )
            if response.status >= 400:
                body = await response.text()
                raise RuntimeError(
                    f"{response.status} from {response.url} with Bearer {data['token']}: {body}"
                )
            body = await response.json()
        except HTTP_ERRORS as exc:
            self.raised.append(exc)
            raise
        return {
            "items": body["data"],
            "cursor": body["next"] or body["resume"],
            "has_more": body["next"] is not None,
        }

    async def handler(self, event: Event, ctx: Any) -> None:
        if ctx.partition.data["slug"] == self.tenant("handler").data["slug"]:
            raise RuntimeError(f"warehouse refused {event.subject} for {ctx.partition.data}")

    def poller(self, **overrides: Any) -> Poller:
        options: dict[str, Any] = {
            "name": POLLER,
            "partitions": self.partitions,
            "identity": lambda item: item["id"],
            "version": lambda item: item["etag"],
            "cursor": {"strategy": "token", "initial": None},
            "fetch": self.fetch,
            "fetch_timeout": FETCH_TIMEOUT,
            "schedule": {"min": "30s", "max": "15m"},
            "circuit": {"failure_threshold": 2, "cooldown": "60s"},
            "handler": {"attempts": 1},
        }
        options.update(overrides)
        return define_poller(**options)

    def http(self) -> HttpClient:
        return HttpClient(timeout=FETCH_TIMEOUT, transport=TenantHosts(self.simulator_url))
