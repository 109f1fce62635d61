"""The simulator's identity provider (issue 45), through HTTP as a connector sees it: refresh
tokens rotate at every use, a spent one presented again revokes the tenant's authorisation and
is counted, access tokens expire, a wrong client is refused, the APIs answer 401 with RFC 6750's
challenge, and the session login's token expires."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, ClientTimeout

from integration.simulator import VendorSimulator, running_simulator
from integration.simulator.identity import CLIENT_ID, CLIENT_SECRET

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_750_000_000.0
BASIC = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sim(clock: Clock) -> VendorSimulator:
    return VendorSimulator(tenants=2, items_per_tenant=4, seed=5, now=clock)


@pytest.fixture
async def http(sim: VendorSimulator) -> AsyncIterator[ClientSession]:
    async with running_simulator(sim) as base_url, ClientSession(base_url=base_url) as session:
        yield session


async def tenants(http: ClientSession) -> list[dict[str, str]]:
    async with http.get("/oauth/tenants") as answer:
        assert answer.status == 200
        listed: list[dict[str, str]] = (await answer.json())["tenants"]
        return listed


async def refresh(
    http: ClientSession, token: str, *, basic: str | None = BASIC, **form: str
) -> tuple[int, dict[str, Any], Any]:
    headers = {} if basic is None else {"Authorization": f"Basic {basic}"}
    data = {"grant_type": "refresh_token", "refresh_token": token} | form
    async with http.post("/oauth/token", data=data, headers=headers) as answer:
        return answer.status, await answer.json(), answer.headers


async def api(
    http: ClientSession, slug: str, stream: str, headers: dict[str, str], kind: str = "oauth"
) -> tuple[int, Any, Any]:
    async with http.get(f"/{kind}-api/{slug}/{stream}", headers=headers) as answer:
        return answer.status, json.loads(await answer.text()), answer.headers


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def admin(http: ClientSession, path: str = "", body: Any = None) -> Any:
    method = "GET" if body is None else "POST"
    async with http.request(method, f"/_admin/identity{path}", json=body) as answer:
        assert answer.status < 300, await answer.text()
        return None if answer.status == 204 else await answer.json()


async def test_a_refresh_rotates_the_refresh_token_and_its_access_token_reads_the_api(
    http: ClientSession, sim: VendorSimulator
) -> None:
    first = (await tenants(http))[0]
    status, body, headers = await refresh(http, first["refresh_token"])
    assert status == 200 and body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["refresh_token"] != first["refresh_token"]
    assert headers["Cache-Control"] == "no-store"
    # The client authenticating in the form instead of HTTP Basic (RFC 6749 section 2.3.1).
    form = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    status, second, _ = await refresh(http, body["refresh_token"], basic=None, **form)
    assert status == 200 and second["refresh_token"] not in (body["refresh_token"], first)
    tenant = first["id"]
    for token in (body["access_token"], second["access_token"]):  # old ones live until expiry
        status, page, _ = await api(http, first["slug"], "contacts", bearer(token))
        assert status == 200 and page["data"] == sim.records(tenant, "users")
    status, page, _ = await api(http, first["slug"], "deals", bearer(second["access_token"]))
    assert [item["id"] for item in page["data"]] == [i["id"] for i in sim.items(tenant)]
    shown = await admin(http)
    assert [(c["tenant"], c["generation"], c["result"]) for c in shown["calls"]] == [
        (tenant, 0, "ok"),
        (tenant, 1, "ok"),
    ]
    assert shown["reuses"] == [] and shown["tenants"][tenant]["generation"] == 2
    assert (await tenants(http))[0]["refresh_token"] == first["refresh_token"]  # still the first


async def test_a_reused_refresh_token_revokes_the_authorisation_and_is_counted(
    http: ClientSession, sim: VendorSimulator, clock: Clock
) -> None:
    first, other = await tenants(http)
    _, rotated, _ = await refresh(http, first["refresh_token"])
    clock.now += 7
    status, body, _ = await refresh(http, first["refresh_token"])  # the spent first grant
    assert (status, body["error"]) == (400, "invalid_grant")
    status, body, _ = await refresh(http, rotated["refresh_token"])  # the family is revoked
    assert (status, body["error"]) == (400, "invalid_grant")
    status, _, headers = await api(http, first["slug"], "contacts", bearer(rotated["access_token"]))
    assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
    shown = await admin(http)
    assert shown["reuses"] == [{"tenant": first["id"], "family": 1, "generation": 0, "at": NOW + 7}]
    assert [c["result"] for c in shown["calls"]] == ["ok", "reused", "revoked"]
    status, _, _ = await refresh(http, other["refresh_token"])  # another tenant is untouched
    assert status == 200
    # The tenant authorises again: the tenants source now hands out the new first grant.
    again = await admin(http, f"/{first['id']}/authorize", {})
    assert (
        again["family"] == 2 and (await tenants(http))[0]["refresh_token"] == again["refresh_token"]
    )
    status, body, _ = await refresh(http, again["refresh_token"])
    assert status == 200 and len((await admin(http))["reuses"]) == 1


async def test_an_access_token_expires_after_expires_in_and_is_refused_with_the_challenge(
    http: ClientSession, clock: Clock
) -> None:
    first = (await tenants(http))[0]
    await admin(http, f"/{first['id']}", {"expires_in": 60})
    _, body, _ = await refresh(http, first["refresh_token"])
    assert body["expires_in"] == 60
    clock.now += 59.9
    assert (await api(http, first["slug"], "deals", bearer(body["access_token"])))[0] == 200
    clock.now += 0.1
    status, error, headers = await api(http, first["slug"], "deals", bearer(body["access_token"]))
    assert status == 401 and error["error"] == "the access token expired"
    assert headers["WWW-Authenticate"].startswith('Bearer realm="simulator", error="invalid_token"')


async def test_the_api_needs_the_tenants_own_access_token(http: ClientSession) -> None:
    first, other = await tenants(http)
    status, _, headers = await api(http, first["slug"], "contacts", {})
    assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="simulator"'
    _, body, _ = await refresh(http, other["refresh_token"])
    status, _, headers = await api(http, first["slug"], "contacts", bearer(body["access_token"]))
    assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
    status, _, _ = await api(http, first["slug"], "contacts", bearer("at_made_up"))
    assert status == 401
    assert (await api(http, "nobody", "contacts", bearer(body["access_token"])))[0] == 404


async def test_a_wrong_client_or_request_is_refused_as_rfc_6749_says(http: ClientSession) -> None:
    token = (await tenants(http))[0]["refresh_token"]
    wrong = base64.b64encode(f"{CLIENT_ID}:nope".encode()).decode()
    status, body, headers = await refresh(http, token, basic=wrong)
    assert (status, body["error"]) == (401, "invalid_client")
    assert headers["WWW-Authenticate"].startswith("Basic")
    form = {"client_id": "someone-else", "client_secret": CLIENT_SECRET}
    assert (await refresh(http, token, basic=None, **form))[:2] == (
        401,
        {"error": "invalid_client", "error_description": "client authentication failed"},
    )
    assert (await refresh(http, token, basic=None))[0] == 401
    status, body, _ = await refresh(http, token, grant_type="client_credentials")
    assert (status, body["error"]) == (400, "unsupported_grant_type")
    status, body, _ = await refresh(http, "", grant_type="refresh_token")
    assert (status, body["error"]) == (400, "invalid_request")
    status, body, _ = await refresh(http, "rt_never_issued")
    assert (status, body["error"]) == (400, "invalid_grant")
    results = [call["result"] for call in (await admin(http))["calls"]]
    assert results == ["invalid_client"] * 3 + [
        "unsupported_grant_type",
        "invalid_request",
        "unknown",
    ]
    assert (await refresh(http, token))[0] == 200  # none of that spent the grant


async def test_a_provider_that_does_not_rotate_keeps_the_refresh_token_usable(
    http: ClientSession,
) -> None:
    await admin(http, "", {"rotate": False})
    token = (await tenants(http))[0]["refresh_token"]
    for _ in range(2):
        status, body, _ = await refresh(http, token)
        assert status == 200 and "refresh_token" not in body
    assert (await admin(http))["reuses"] == []


async def test_the_rotation_is_committed_before_a_delayed_answer_leaves(
    http: ClientSession,
) -> None:
    """A client that gives up (or dies) while the answer is delayed has spent its grant."""
    await admin(http, "", {"delay": 0.5})
    token = (await tenants(http))[0]["refresh_token"]
    with pytest.raises(asyncio.TimeoutError):
        data = {"grant_type": "refresh_token", "refresh_token": token}
        headers = {"Authorization": f"Basic {BASIC}"}
        timeout = ClientTimeout(total=0.1)
        async with http.post("/oauth/token", data=data, headers=headers, timeout=timeout):
            pass
    await admin(http, "", {"delay": 0})
    status, body, _ = await refresh(http, token)
    assert (status, body["error"]) == (400, "invalid_grant")
    assert len((await admin(http))["reuses"]) == 1


async def test_revoking_a_tenant_ends_its_tokens_and_sessions(http: ClientSession) -> None:
    first = (await tenants(http))[0]
    _, body, _ = await refresh(http, first["refresh_token"])
    session = await login(http, first["username"], first["password"])
    assert await admin(http, f"/{first['id']}/revoke", {}) is None
    assert (await refresh(http, body["refresh_token"]))[0] == 400
    assert (await api(http, first["slug"], "deals", bearer(body["access_token"])))[0] == 401
    headers = {"X-Session": session["token"]}
    assert (await api(http, first["slug"], "deals", headers, "session"))[0] == 401


async def login(http: ClientSession, username: str, password: str) -> Any:
    async with http.post("/session/login", json={"username": username, "password": password}) as a:
        return await a.json() if a.status == 200 else a.status


async def test_a_session_token_from_the_login_reads_the_api_until_it_expires(
    http: ClientSession, sim: VendorSimulator, clock: Clock
) -> None:
    first, other = await tenants(http)
    assert await login(http, first["username"], other["password"]) == 401
    assert await login(http, "nobody", first["password"]) == 401
    await admin(http, f"/{first['id']}", {"session_expires_in": 30})
    session = await login(http, first["username"], first["password"])
    assert session["expires_in"] == 30
    headers = {"X-Session": session["token"]}
    status, page, _ = await api(http, first["slug"], "contacts", headers, "session")
    assert status == 200 and page["data"] == sim.records(first["id"], "users")
    assert (await api(http, other["slug"], "contacts", headers, "session"))[0] == 401
    assert (await api(http, first["slug"], "contacts", {}, "session"))[0] == 401
    clock.now += 30
    status, error, _ = await api(http, first["slug"], "contacts", headers, "session")
    assert status == 401 and "log in again" in error["error"]
    logins = [(entry["tenant"], entry["result"]) for entry in (await admin(http))["logins"]]
    assert logins == [
        (first["id"], "invalid_credentials"),
        (None, "invalid_credentials"),
        (first["id"], "ok"),
    ]


async def test_a_changed_record_is_listed_after_the_resume_cursor_and_served_once(
    http: ClientSession, sim: VendorSimulator, clock: Clock
) -> None:
    first = (await tenants(http))[0]
    _, body, _ = await refresh(http, first["refresh_token"])
    auth = bearer(body["access_token"])
    _, page, _ = await api(http, first["slug"], "deals", auth)
    assert page["next"] is None
    clock.now += 1
    changed = sim.update_item(first["id"], page["data"][1]["id"], amount=12.5)
    path = f"/oauth-api/{first['slug']}/deals?cursor={page['resume']}"
    async with http.get(path, headers=auth) as answer:
        later = await answer.json()
    assert [item["etag"] for item in later["data"]] == [changed["etag"]]
    served = sim.served(first["id"], "items")
    assert len(served) == len({(s["id"], s["version"]) for s in served}) == 5


async def test_the_standalone_simulator_serves_the_identity_provider() -> None:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "integration.simulator", "--tenants=1", "--port=0"),
        *("--client-id=app", "--client-secret=s3", "--token-expires-in=5"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        info = json.loads(await asyncio.wait_for(proc.stdout.readline(), timeout=10))
        async with ClientSession(base_url=info["base_url"]) as http:
            token = (await tenants(http))[0]["refresh_token"]
            basic = base64.b64encode(b"app:s3").decode()
            status, body, _ = await refresh(http, token, basic=basic)
            assert status == 200 and body["expires_in"] == 5
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_bad_settings_and_unknown_tenants_are_refused_by_the_admin_api(
    http: ClientSession,
) -> None:
    for path, body in [
        ("", {"expires_in": 0}),
        ("", {"delay": -1}),
        ("", {"rotate": "no"}),
        ("", {"lifetime": 5}),
        ("", {"client_secret": ""}),
        ("/t_0001", {"client_id": "x"}),  # the client is the provider's, not a tenant's
    ]:
        async with http.post(f"/_admin/identity{path}", json=body) as answer:
            assert answer.status == 400, body
    for path in ("/t_9999", "/t_9999/authorize", "/t_9999/revoke"):
        async with http.post(f"/_admin/identity{path}", json={}) as answer:
            assert answer.status == 404
