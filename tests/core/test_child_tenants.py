"""Which tenant a child partition belongs to: what a child stream's rate-limit pacing is
keyed by, so a 429 for one project's issues slows the tenant's other streams and children."""

from __future__ import annotations

import pytest

from watukuy.core.children import child_key, tenant_of
from watukuy.core.poller import Partition

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("partition", "tenant"),
    [
        (Partition("acme"), "acme"),
        (Partition(child_key("acme", "P1"), parents=("P1",)), "acme"),
        (Partition(child_key(child_key("acme", "P1"), "I7"), parents=("I7", "P1")), "acme"),
        (Partition(""), ""),  # an unpartitioned poller's only key
    ],
)
def test_a_childs_tenant_is_its_key_before_the_ancestors(partition: Partition, tenant: str) -> None:
    assert tenant_of(partition) == tenant
