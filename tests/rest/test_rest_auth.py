"""``rest.auth`` and ``rest.tls``: credentials checked on every route but ``/health``, the
config rules that make them the default, and a real listener on ``rest.listen``."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import logging
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.rest.fake_control import FakeControl
from tests.rest.support import error_of, rest_client, seed
from watukuy.config import ConfigError, parse_config
from watukuy.config.model import RestAuth, RestSettings
from watukuy.rest import start_rest

TOKEN = "tok-canary-0f9e8d7c"
PASSWORD = "pw-canary-a1b2c3"
AUTH = RestAuth(tokens=(TOKEN, "second-token"), basic=(("ops", PASSWORD),))


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    "header",
    [f"Bearer {TOKEN}", "bearer second-token", basic("ops", PASSWORD)],
)
async def test_valid_credentials_pass(header: str) -> None:
    async with rest_client(auth=AUTH) as client:
        response = await client.get("/connectors", headers={"Authorization": header})
        assert response.status == 200
        assert await response.json() == ["invoices", "tenants", "tickets"]


@pytest.mark.parametrize(
    "header",
    [
        None,
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        f"Token {TOKEN}",
        basic("ops", "wrong"),
        basic("root", PASSWORD),
        "Basic !!!not-base64",
        f"Basic {TOKEN}",
    ],
)
async def test_anything_else_is_401_with_a_challenge(header: str | None) -> None:
    fake = seed(FakeControl())
    before = fake.snapshot()
    headers = {} if header is None else {"Authorization": header}
    async with rest_client(fake, auth=AUTH) as client:
        for method, path in [
            ("GET", "/connectors"),
            ("DELETE", "/connectors/tickets"),
            ("GET", "/openapi.json"),
            ("GET", "/metrics"),
            ("GET", "/no-such-route"),
        ]:
            response = await client.request(method, path, headers=headers)
            text = await response.text()
            message = await error_of(response, 401)
            assert response.headers.getall("WWW-Authenticate") == [
                'Bearer realm="watukuy"',
                'Basic realm="watukuy", charset="UTF-8"',
            ]
            assert TOKEN not in text and PASSWORD not in text
    if header is None:
        assert message == (
            "credentials are required: send Authorization: Bearer <token> or "
            "Authorization: Basic <user:password in base64>"
        )
    else:
        assert message == "the credentials are not valid"
    assert fake.snapshot() == before


async def test_health_is_open_for_probes() -> None:
    async with rest_client(auth=AUTH) as client:
        response = await client.get("/health")
        assert response.status == 200
        assert (await response.json())["status"] == "healthy"
        assert (await client.get("/healthz")).status == 401


async def test_a_token_only_config_challenges_bearer_only() -> None:
    async with rest_client(auth=RestAuth(tokens=(TOKEN,))) as client:
        response = await client.get("/", headers={"Authorization": basic("ops", PASSWORD)})
        await error_of(response, 401)
        assert response.headers.getall("WWW-Authenticate") == ['Bearer realm="watukuy"']


# --- the config ------------------------------------------------------------------------------


def runner_config(rest: Any) -> dict[str, Any]:
    return {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "runner-1"},
        "rest": rest,
        "pollers": [
            {
                "name": "tickets",
                "request": {"url": "https://a.test/x"},
                "records": "d",
                "identity": "id",
            }
        ],
    }


def rest_error(rest: Any, base_dir: Path | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(runner_config(rest), base_dir=base_dir)
    return caught.value


@pytest.mark.parametrize("listen", ["0.0.0.0:8083", "[::]:8083", "10.0.0.5:8083", "myhost:8083"])
def test_off_loopback_auth_must_be_written_out(listen: str) -> None:
    error = rest_error({"listen": listen})
    assert error.path == "rest.auth"
    assert "is required when rest.listen is not a loopback address" in str(error)
    settings = parse_config(runner_config({"listen": listen, "auth": "none"})).rest
    assert settings.auth is None


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "127.8.0.1:8083", "[::1]:8083", "localhost:80"])
def test_on_loopback_auth_is_optional(listen: str) -> None:
    assert parse_config(runner_config({"listen": listen})).rest.auth is None


def test_credentials_from_secrets_are_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WK_REST_TOKEN", TOKEN)
    monkeypatch.setenv("WK_REST_PW", PASSWORD)
    rest = {
        "listen": "0.0.0.0:8083",
        "auth": {"tokens": ["${env:WK_REST_TOKEN}"], "basic": {"ops": "${env:WK_REST_PW}"}},
    }
    cfg = parse_config(runner_config(rest))
    assert cfg.rest.auth == RestAuth(tokens=(TOKEN,), basic=(("ops", PASSWORD),))
    for text in (repr(cfg), repr(cfg.rest), str(cfg.rest.auth), str(cfg.describe())):
        assert TOKEN not in text and PASSWORD not in text
    assert cfg.describe()["rest"] == {"listen": "0.0.0.0:8083", "auth": "[redacted]"}


@pytest.mark.parametrize(
    ("auth", "path", "message"),
    [
        ("None", "rest.auth", "must be {tokens: [...]}, {basic: {user: password}} or none"),
        ({}, "rest.auth", "must give tokens and/or basic users (or write 'auth: none')"),
        ({"token": [TOKEN]}, "rest.auth.token", "unknown key; did you mean 'tokens'?"),
        ({"tokens": TOKEN}, "rest.auth.tokens", "must be a non-empty list of tokens, got a str"),
        ({"tokens": []}, "rest.auth.tokens", "must be a non-empty list of tokens, got a list"),
        ({"tokens": [TOKEN, 7]}, "rest.auth.tokens[1]", "must be a string, got an int"),
        ({"tokens": [" "]}, "rest.auth.tokens[0]", "must not be empty"),
        ({"basic": [PASSWORD]}, "rest.auth.basic", "must be a non-empty mapping"),
        ({"basic": {"a:b": PASSWORD}}, "rest.auth.basic.a:b", "a user name must be"),
        ({"basic": {"ops": ""}}, "rest.auth.basic.ops", "the password must not be empty"),
        (
            {"basic": {"ops": 1234}},
            "rest.auth.basic.ops",
            "the password must be a string, got an int",
        ),
    ],
)
def test_bad_auth_is_named_without_its_values(auth: Any, path: str, message: str) -> None:
    error = rest_error({"listen": "127.0.0.1:8083", "auth": auth})
    assert error.path == path
    assert str(error).startswith(f"{path}: {message}")
    assert TOKEN not in str(error) and PASSWORD not in str(error)


# --- TLS and the listener --------------------------------------------------------------------


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_tls_paths_are_relative_to_the_config_and_checked(tmp_path: Path) -> None:
    self_signed(tmp_path)
    rest = {"listen": "127.0.0.1:0", "tls": {"cert": "server.pem", "key": "server.key"}}
    tls = parse_config(runner_config(rest), base_dir=tmp_path).rest.tls
    assert tls is not None and tls.cert == tmp_path / "server.pem"

    missing = rest_error({"tls": {"cert": "server.pem", "key": "nope.key"}}, tmp_path)
    assert missing.path == "rest.tls.key"
    assert str(missing) == f"rest.tls.key: file '{tmp_path / 'nope.key'}' not found"
    assert rest_error({"tls": {"cert": "server.pem"}}, tmp_path).path == "rest.tls.key"

    other = tmp_path / "other"
    other.mkdir()
    self_signed(other)
    mismatched = {"tls": {"cert": "server.pem", "key": "other/server.key"}}
    error = rest_error(mismatched, tmp_path)
    assert error.path == "rest.tls"
    assert "cannot load the certificate and key" in str(error)


async def test_start_rest_serves_https_with_credentials_on_a_free_port(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path)
    rest = {
        "listen": "127.0.0.1:0",
        "auth": {"tokens": [TOKEN]},
        "tls": {"cert": "server.pem", "key": "server.key"},
    }
    settings = parse_config(runner_config(rest), base_dir=tmp_path).rest
    client_tls = ssl.create_default_context(cafile=str(cert))
    async with start_rest(seed(FakeControl()), settings) as server:
        assert server.port > 0
        assert server.url == f"https://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as session:
            answer = await session.get(
                f"{server.url}/connectors",
                headers={"Authorization": f"Bearer {TOKEN}"},
                ssl=client_tls,
            )
            assert await answer.json() == ["invoices", "tenants", "tickets"]
            refused = await session.get(f"{server.url}/connectors", ssl=client_tls)
            assert refused.status == 401
            with pytest.raises(aiohttp.ClientError):
                await session.get(f"http://127.0.0.1:{server.port}/health")
        port = server.port
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"https://127.0.0.1:{port}/health", ssl=client_tls)


async def test_start_rest_plain_http_and_nothing_logged(caplog: pytest.LogCaptureFixture) -> None:
    settings = RestSettings(host="127.0.0.1", port=0, auth=AUTH)
    with caplog.at_level(logging.DEBUG):
        async with (
            start_rest(seed(FakeControl()), settings) as server,
            aiohttp.ClientSession() as session,
        ):
            for header in (f"Bearer {TOKEN}", "Bearer wrong", basic("ops", PASSWORD)):
                await session.get(f"{server.url}/connectors", headers={"Authorization": header})
            health = await session.get(f"{server.url}/health")
            assert health.status == 200
    assert TOKEN not in caplog.text and PASSWORD not in caplog.text
    assert base64.b64encode(f"ops:{PASSWORD}".encode()).decode() not in caplog.text


async def test_a_taken_port_fails_the_start() -> None:
    fake = seed(FakeControl())
    async with start_rest(fake, RestSettings(host="127.0.0.1", port=0)) as first:
        taken = RestSettings(host="127.0.0.1", port=first.port)
        with pytest.raises(OSError):
            async with start_rest(fake, taken):
                pass
