"""The local broker's cluster id is one Kafka's storage tool accepts as an argument."""

from __future__ import annotations

import base64

import pytest

from integration.kafka.broker import cluster_id

pytestmark = pytest.mark.unit


def test_cluster_ids_never_look_like_an_option() -> None:
    ids = [cluster_id() for _ in range(2000)]  # a leading '-' came up 1 time in 64 before

    assert not any(text.startswith("-") for text in ids)
    assert all(len(text) == 22 and len(base64.urlsafe_b64decode(text + "==")) == 16 for text in ids)
    assert len(set(ids)) == len(ids)
