"""The runner config's ``credentials`` section as a user writes it: each bad field named by its
path, the key and the endpoint's auth never shown, and the store it makes."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from watukuy.config import parse_config
from watukuy.config.credentials import (
    CREDENTIALS_KEYS,
    HTTP_KEYS,
    CredentialSettings,
    HttpStoreSettings,
    credential_store,
)
from watukuy.config.reference import keys_under
from watukuy.core.errors import ConfigError
from watukuy.store.credentials.http import HttpCredentials
from watukuy.store.credentials.memory import MemoryCredentials
from watukuy.store.kafka.credentials import KafkaCredentials
from watukuy.store.kafka.topics import TopicLayout

pytestmark = pytest.mark.unit

KEY = os.urandom(32)
KEY_TEXT = base64.b64encode(KEY).decode()
OLD = os.urandom(32)
URL = "https://app.internal/tenants/{partition.key}/grant"
POLLER = {
    "name": "crm",
    "request": {"url": "http://127.0.0.1:9/items"},
    "records": "data",
    "identity": "id",
}


def config(credentials: Any) -> dict[str, Any]:
    return {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "runner-1"},
        "pollers": [POLLER],
        "credentials": credentials,
    }


def error_of(credentials: Any) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        parse_config(config(credentials))
    return raised.value


def test_without_the_section_there_is_no_store() -> None:
    cfg = parse_config({k: v for k, v in config(None).items() if k != "credentials"})
    assert cfg.credentials is None
    assert "credentials" not in cfg.describe()


def test_the_kafka_store_with_a_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATUKUY_TEST_CREDENTIALS_KEY", KEY_TEXT)
    cfg = parse_config(config({"key": "${env:WATUKUY_TEST_CREDENTIALS_KEY}"}))
    assert cfg.credentials == CredentialSettings(store="kafka", keys=(KEY,), lost_after=60.0)
    assert cfg.describe()["credentials"] == {
        "store": "kafka",
        "key": "[redacted]",
        "lost_after": "1m",
    }
    for shown in (repr(cfg), str(cfg.describe()), repr(cfg.credentials)):
        assert KEY_TEXT not in shown and KEY.hex() not in shown


def test_keys_to_rotate_and_a_lost_after() -> None:
    cfg = parse_config(config({"keys": [KEY.hex(), OLD.hex()], "lost_after": "90s"}))
    assert cfg.credentials is not None
    assert cfg.credentials.keys == (KEY, OLD)
    assert cfg.credentials.lost_after == 90.0
    assert cfg.describe()["credentials"]["keys"] == ["[redacted]", "[redacted]"]
    assert KEY.hex() not in repr(cfg) and OLD.hex() not in repr(cfg)


def test_the_http_store_needs_no_key_and_hides_its_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATUKUY_TEST_APP", "https://app.internal")
    http = {
        "url": "${env:WATUKUY_TEST_APP}/tenants/{partition.key}/grant",
        "method": "post",
        "auth": {"bearer": "b-token-1"},
        "headers": {"X-App-Key": "h-value-1"},
    }
    cfg = parse_config(config({"store": {"http": http}}))
    settings = cfg.credentials
    assert settings is not None and settings.keys == ()
    assert settings.store == HttpStoreSettings(
        url=URL,
        shown_url="${env:WATUKUY_TEST_APP}/tenants/{partition.key}/grant",
        method="POST",
        bearer="b-token-1",
        headers=(("X-App-Key", "h-value-1"),),
    )
    # A value holding a secret is redacted whole in describe(), as every such config value is.
    assert cfg.describe()["credentials"]["store"] == {
        "http": {
            "url": "[redacted]",
            "method": "POST",
            "auth": {"bearer": "[redacted]"},
            "headers": {"X-App-Key": "[redacted]"},
        }
    }
    for shown in (repr(cfg), repr(settings)):
        assert "b-token-1" not in shown and "h-value-1" not in shown


@pytest.mark.parametrize(
    ("credentials", "path", "message"),
    [
        ([1], "credentials", "must be a mapping"),
        ({"stor": "kafka", "key": KEY_TEXT}, "credentials.stor", "unknown"),
        ({}, "credentials.key", "is required"),
        ({"key": KEY_TEXT, "keys": [KEY_TEXT]}, "credentials", "give key or keys, not both"),
        ({"key": "short"}, "credentials.key", "must be 32 bytes"),
        ({"keys": [KEY_TEXT, "bad!"]}, "credentials.keys[1]", "must be 32 bytes"),
        ({"keys": KEY_TEXT}, "credentials.keys", "must be a list"),
        ({"key": KEY_TEXT, "lost_after": 60}, "credentials.lost_after", "a bare number"),
        ({"key": KEY_TEXT, "lost_after": "0s"}, "credentials.lost_after", "positive"),
        ({"store": "redis"}, "credentials.store", "must be kafka or {http"),
        ({"store": {"s3": {}}}, "credentials.store.s3", "unknown"),
        ({"store": {"http": {}}}, "credentials.store.http.url", "is required"),
        ({"store": {"http": {"url": "app/{partition.key}"}}}, "credentials.store.http.url", "http"),
        (
            {"store": {"http": {"url": "https://a/{tenant}"}}},
            "credentials.store.http.url",
            "not {tenant}",
        ),
        (
            {"store": {"http": {"url": URL, "method": "GET"}}},
            "credentials.store.http.method",
            "must be one of: PUT, POST, PATCH",
        ),
        (
            {"store": {"http": {"url": URL, "auth": {"basic": "u:p"}}}},
            "credentials.store.http.auth.basic",
            "unknown",
        ),
        (
            {"store": {"http": {"url": URL, "auth": {"bearer": ""}}}},
            "credentials.store.http.auth.bearer",
            "non-empty",
        ),
        (
            {"store": {"http": {"url": URL, "headers": {"X-K": 5}}}},
            "credentials.store.http.headers.X-K",
            "must be a string",
        ),
        (
            {"store": {"http": {"url": URL}}, "key": "nope"},
            "credentials.key",
            "must be 32 bytes",
        ),
    ],
)
def test_each_bad_field_is_named(credentials: Any, path: str, message: str) -> None:
    error = error_of(credentials)
    assert error.path == path
    assert message in str(error)


def test_a_bad_key_from_a_secret_is_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATUKUY_TEST_CREDENTIALS_KEY", "almost-a-key-but-not-quite")
    error = error_of({"key": "${env:WATUKUY_TEST_CREDENTIALS_KEY}"})
    assert error.path == "credentials.key"
    assert "almost-a-key" not in str(error)


def test_every_key_the_parser_knows_is_documented() -> None:
    assert {k for k in keys_under("credentials") if "." not in k} == set(CREDENTIALS_KEYS)
    http = {k.split(".")[0] for k in keys_under("credentials.store.http")}
    assert http == set(HTTP_KEYS)


def test_the_factory_makes_the_store_configured() -> None:
    layout = TopicLayout("wt", 3, 1)
    kafka = {"bootstrap.servers": "127.0.0.1:9092"}
    on_kafka = credential_store(CredentialSettings(keys=(KEY,)), kafka, layout)
    assert isinstance(on_kafka, KafkaCredentials)
    assert isinstance(
        credential_store(CredentialSettings(keys=(KEY,)), None, None), MemoryCredentials
    )
    http = HttpStoreSettings(url=URL, shown_url=URL, bearer="b-token-1")
    made = credential_store(CredentialSettings(store=http), kafka, layout)
    assert isinstance(made, HttpCredentials)
    assert "b-token-1" not in repr(made)
