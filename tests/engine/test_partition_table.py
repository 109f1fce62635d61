"""A poller's partition table knows when it must be listed again, even when asked while a
listing is under way (a takeover while a child stream's listing waited for the store)."""

from __future__ import annotations

import pytest

from watukuy.engine.listings import PartitionTable

pytestmark = pytest.mark.unit


def test_a_listing_ended_is_the_tables_time_of_listing() -> None:
    table = PartitionTable()
    began = table.asked_again
    table.listing_ended(5.0, began)
    assert table.refreshed_at == 5.0


def test_a_listing_asked_for_again_while_one_is_under_way_stays_due_after_it() -> None:
    # The survivor of a failover restored a victim's child keys while its child stream's
    # listing, begun before, waited for the store: that listing ended without them, and the
    # mark the takeover left (list again) was lost, so the children waited a refresh interval.
    table = PartitionTable()
    table.listing_ended(1.0, table.asked_again)
    began = table.asked_again
    table.list_again()  # the takeover, while the listing waits
    assert table.refreshed_at is None
    table.listing_ended(2.0, began)
    assert table.refreshed_at is None  # still due: the next pass lists it with the new keys
    table.listing_ended(3.0, table.asked_again)  # that next listing
    assert table.refreshed_at == 3.0
