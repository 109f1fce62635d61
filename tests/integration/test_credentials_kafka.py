"""The credential store contract on ``<prefix>.credentials`` of the real broker, and what only
the Kafka store promises: the topic holds ciphertext only, a store that cannot read it stops
at start with the setting to fix (never the key), and keys rotate with ``keys: [new, old]``."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from integration.faults.topics import Raw, read_raw
from tests.store.credentials.contract import CredentialContract, Opener, claim, grant
from watukuy.core.errors import ConfigError
from watukuy.core.grants import GrantRef, TokenAnswer, handed_in, rotated
from watukuy.store.credentials import CredentialStore
from watukuy.store.credentials.cipher import Cipher, key_id
from watukuy.store.kafka.credential_records import KEY_ID_HEADER
from watukuy.store.kafka.credentials import KafkaCredentials
from watukuy.store.kafka.topics import TopicLayout

NEW, OLD = os.urandom(32), os.urandom(32)
REF = GrantRef("crm", "acme")
Start = Callable[..., Any]  # async (*keys, cipher=...) -> a started KafkaCredentials


@pytest.fixture
async def start(kafka_bootstrap: str, prefix: str) -> AsyncIterator[Start]:
    """Opens stores on this test's prefix (3 partitions); closes them at the end."""
    layout = TopicLayout(prefix, partitions=3, replication_factor=1)
    opened: list[KafkaCredentials] = []

    async def open_(*keys: bytes) -> KafkaCredentials:
        cipher = Cipher(list(keys or (NEW,)))
        store = KafkaCredentials({"bootstrap.servers": kafka_bootstrap}, layout, cipher)
        opened.append(store)
        await store.start()
        return store

    yield open_
    for store in opened:
        await store.close()


class TestKafkaCredentials(CredentialContract):
    @pytest.fixture
    def opener(self, start: Start) -> Opener:
        async def open_() -> CredentialStore:
            store: CredentialStore = await start()
            return store

        return open_


def records(bootstrap: str, prefix: str) -> list[Raw]:
    return read_raw(bootstrap, [f"{prefix}.credentials"], timeout=30)


async def test_the_topic_holds_no_token(start: Start, kafka_bootstrap: str, prefix: str) -> None:
    store = await start()
    first = handed_in("rt-SECRET-one", 0.0)
    saved = rotated(first, TokenAnswer("at-SECRET-two", "rt-SECRET-three", 10.0), 5.0)
    await store.save(REF, saved)
    await store.claim(claim(REF, saved.serial))
    found = records(kafka_bootstrap, prefix)
    assert {r.key for r in found} == {b"grant/crm/acme", b"claim/crm/acme/1"}
    assert len({r.partition for r in found}) == 1  # one tenant: one partition, one order
    for record in found:
        raw = b"".join([record.key or b"", record.value or b"", *(v for _, v in record.headers)])
        for secret in ("rt-SECRET-one", "at-SECRET-two", "rt-SECRET-three", "SECRET"):
            assert secret.encode() not in raw
            assert base64.b64encode(secret.encode()) not in raw
    grant_record = next(r for r in found if r.key == b"grant/crm/acme")
    assert grant_record.header(KEY_ID_HEADER) == key_id(NEW)
    claim_record = next(r for r in found if r.key == b"claim/crm/acme/1")
    assert json.loads(claim_record.value or b"")["runner"] == "r1"  # claims are plain JSON


async def test_the_topic_is_compacted_and_keeps_claims_an_hour(
    start: Start, kafka_bootstrap: str, prefix: str
) -> None:
    await start()
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource("topic", f"{prefix}.credentials")
    config = admin.describe_configs([resource])[resource].result(timeout=30)
    assert config["cleanup.policy"].value == "compact"
    assert config["min.compaction.lag.ms"].value == "3600000"


async def test_another_key_stops_the_start_naming_the_setting_not_the_key(start: Start) -> None:
    writer = await start(OLD)
    await writer.save(REF, grant())
    with pytest.raises(ConfigError) as caught:
        await start(NEW)
    message = str(caught.value)
    assert caught.value.path == "credentials.keys"
    assert f"written with a key not given here (key id {key_id(OLD)})" in message
    assert "'crm/acme'" in message
    for key in (OLD, NEW):
        assert key.hex() not in message
        assert base64.b64encode(key).decode().rstrip("=") not in message


async def test_keys_new_old_read_old_records_and_write_with_the_new(
    start: Start, kafka_bootstrap: str, prefix: str
) -> None:
    old = await start(OLD)
    await old.save(REF, grant("before"))
    rotated_store = await start(NEW, OLD)
    assert await rotated_store.load(REF) == grant("before")
    other = GrantRef("crm", "globex")
    await rotated_store.save(other, grant("after"))
    written = {r.key: r.header(KEY_ID_HEADER) for r in records(kafka_bootstrap, prefix)}
    assert written == {b"grant/crm/acme": key_id(OLD), b"grant/crm/globex": key_id(NEW)}
    # Once acme's grant is written again with the new key, the old key may go.
    await rotated_store.save(REF, grant("rewritten"))
    new_only = await start(NEW)
    assert await new_only.load(REF) == grant("rewritten")
    assert await new_only.load(other) == grant("after")


async def test_a_tampered_record_stops_the_start(
    start: Start, kafka_bootstrap: str, prefix: str
) -> None:
    store = await start()
    await store.save(REF, grant())
    (record,) = records(kafka_bootstrap, prefix)
    value = record.value or b""
    tampered = value[:-20] + bytes([value[-20] ^ 1]) + value[-19:]
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(
        record.topic, tampered, record.key, partition=record.partition, headers=list(record.headers)
    )
    assert producer.flush(30) == 0
    with pytest.raises(ConfigError, match="fails authentication") as caught:
        await start()
    assert caught.value.path == "credentials.keys"


async def test_a_grant_saved_elsewhere_reaches_a_running_store(start: Start) -> None:
    reader, writer = await start(), await start()
    await writer.save(REF, grant("elsewhere"))
    for _ in range(100):  # the reader's tail sees it within moments
        if await reader.load(REF) is not None:
            break
        await asyncio.sleep(0.05)
    assert await reader.load(REF) == grant("elsewhere")


async def test_a_claim_log_alone_needs_no_key_and_leaves_grants_alone(
    start: Start, kafka_bootstrap: str, prefix: str
) -> None:
    """The HTTP store's claims on a runner: ``<prefix>.credentials`` without a cipher."""
    writer = await start(OLD)
    await writer.save(REF, grant())  # a grant no claim log can read: not its business
    layout = TopicLayout(prefix, partitions=3, replication_factor=1)
    logs = [KafkaCredentials({"bootstrap.servers": kafka_bootstrap}, layout, None) for _ in "ab"]
    try:
        for log in logs:
            await log.start()
        assert await logs[0].load(REF) is None
        claims = [claim(REF, 2, "r1"), claim(REF, 2, "r2")]
        answers = await asyncio.gather(*(log.claim(c) for log, c in zip(logs, claims, strict=True)))
        assert answers[0] == answers[1] and answers[0] in claims
        with pytest.raises(ConfigError, match=r"^credentials\.key: is required"):
            await logs[0].save(REF, grant())
    finally:
        for log in logs:
            await log.close()
