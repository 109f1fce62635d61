"""The pure parts of the failover benchmark (issue 25): the preloaded records' layout, the
check that no event is about one of them, and the reading of a runner's metrics.

The preload stands for state a runner committed: its records must be keyed, co-partitioned and
encoded as the store writes them, or the runners would restore something else (or refuse it).
"""

from __future__ import annotations

from collections import Counter

import pytest

from integration.bench.failover import (
    POLLER,
    PRELOAD_PREFIX,
    bench_poller,
    key_of,
    parse_metrics,
    preload_records,
    preloaded_subject,
)
from watukuy.core.poll import fresh_state
from watukuy.serde.state import decode_item, decode_state
from watukuy.store.kafka import records
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.topics import TopicLayout

pytestmark = pytest.mark.unit

LAYOUT = TopicLayout(prefix="fo", partitions=8, replication_factor=1)
TENANTS = [f"t_{n:04d}" for n in range(7)]
NOW = 1_800_000_000.0


def test_the_bench_poller_is_invoices_on_the_bench_schedule_and_never_reconciles() -> None:
    poller = bench_poller("2s")
    assert poller.name == POLLER
    assert poller.reconcile is None
    assert poller.schedule.min == poller.schedule.max == 2.0


def test_each_key_gets_a_fresh_state_and_its_share_of_entries_on_its_partition() -> None:
    poller = bench_poller("2s")
    written = list(preload_records(LAYOUT, poller, TENANTS, 100, NOW))

    states = [r for r in written if r[0] == LAYOUT.state]
    items = [r for r in written if r[0] == LAYOUT.items]
    assert len(states) == len(TENANTS) and len(items) == 100
    assert len(written) == len(states) + len(items)  # no parked records unless asked
    for _, partition, key, value in states:
        assert value is not None
        state = decode_state(value)
        assert key == records.state_key(POLLER, state.partition)
        assert partition == partition_for(key_of(state.partition), LAYOUT.partitions)
        assert state == fresh_state(poller, state.partition, NOW)
    per_key: Counter[str] = Counter()
    identities = set()
    for _, partition, key, value in items:
        assert value is not None
        owner, identity, entry = decode_item(value)
        tenant = owner.removeprefix(f"{POLLER}/")
        assert key == records.item_key(POLLER, tenant, identity)
        assert records.owner_of(key) == records.state_key(POLLER, tenant)
        assert partition == partition_for(key_of(tenant), LAYOUT.partitions)  # co-partitioned
        assert identity.startswith(PRELOAD_PREFIX)
        assert entry.deleted is None and entry.seen == NOW
        per_key[tenant] += 1
        identities.add(identity)
    assert len(identities) == 100
    assert sorted(per_key.values()) == [14, 14, 14, 14, 14, 15, 15]  # 100 = 7 x 14 + 2


def test_parked_tombstones_leave_no_partition_of_the_parked_topic_empty_that_holds_a_key() -> None:
    poller = bench_poller("2s")
    written = list(preload_records(LAYOUT, poller, TENANTS, 10, NOW, parked_tombstones=True))

    parked = [r for r in written if r[0] == LAYOUT.parked]
    used = {partition_for(key_of(t), LAYOUT.partitions) for t in TENANTS}
    assert sorted(p for _, p, _, _ in parked) == sorted(used)
    for _, partition, key, value in parked:
        assert value is None  # a tombstone: it removes a parked item that was never written
        tenant = records.owner_of(key).decode().removeprefix(f"{POLLER}/")
        assert tenant in TENANTS
        assert partition == partition_for(key_of(tenant), LAYOUT.partitions)


def test_an_event_is_about_a_preloaded_entry_when_its_subject_is_one() -> None:
    assert preloaded_subject([("ce_id", b"x"), ("ce_subject", f"{PRELOAD_PREFIX}1-2".encode())])
    assert not preloaded_subject([("ce_subject", b"it_123")])
    assert not preloaded_subject([("ce_subject", None)])
    assert not preloaded_subject(None)


def test_metrics_are_summed_over_their_labels() -> None:
    text = "\n".join(
        [
            "# HELP watukuy_restore_records_total Records read while restoring partitions.",
            "# TYPE watukuy_restore_records_total counter",
            "watukuy_restore_records_total 1.5e+06",
            'watukuy_rebalances_total{change="assigned"} 8.0',
            'watukuy_rebalances_total{change="lost"} 4.0',
            "watukuy_restore_records_from_disk_total 27.0",
            "",
        ]
    )
    figures = parse_metrics(text)
    assert figures["watukuy_restore_records_total"] == 1_500_000
    assert figures["watukuy_rebalances_total"] == 12
    assert figures["watukuy_restore_records_from_disk_total"] == 27
