"""The local-store benchmark (issue 25) at a tiny size: what it reports must add up.

A run writes 20,000 entries, reads every key back, commits pages, deletes ranges, then SIGKILLs
a writer mid-stream and reopens the store; the checks here are the ones the benchmark's own
figures rest on. The reopen's check is also shown a store whose offsets run ahead of its data,
and one whose data runs ahead of its offsets: it must refuse both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.bench import local_store
from integration.bench.local_store import CRASH_KEYS, CRASH_SIZES, Workload

pytestmark = pytest.mark.unit

MODULES = {"rocksdb": "rocksdict", "lmdb": "lmdb"}
TINY = Workload(entries=20_000, keys=20, batch=1000, commits=100, synced_commits=5, deletes=3)


@pytest.mark.parametrize("engine", sorted(MODULES))
def test_a_tiny_run_reads_back_what_it_wrote_and_its_offsets_survive_a_sigkill(
    engine: str, tmp_path: Path
) -> None:
    pytest.importorskip(MODULES[engine])
    row = local_store.measure(engine, tmp_path / engine, TINY)

    assert row["entries_read"] == row["entries_written"] == TINY.entries
    assert row["keys_wrong"] == 0
    assert row["deleted_left"] == 0 and row["wrong"] == 0
    # the writer was killed after its 40th batch; the store holds every batch it acknowledged
    # and at most the one it was writing, whole, and its offsets say which
    assert row["crash_acked"] >= 40
    assert row["crash_acked"] <= row["crash_offset"] <= row["crash_acked"] + 1
    assert row["crash_consistent"]
    assert row["checks"] == "ok"
    assert row["disk_mb"] > 0 and row["open_s"] > 0
    assert not (tmp_path / engine).exists()  # a run removes its store


def _batch(seq: int, with_entries: bool = True) -> list[tuple[bytes, bytes]]:
    """What the crash writer writes as batch ``seq``: its entries, then its offsets."""
    prefix = local_store.owner(seq % CRASH_KEYS, "crash")
    size = CRASH_SIZES[seq % 10] if with_entries else 0
    entries = [
        (local_store.item_key(prefix, f"{seq}-{j}"), local_store.item_value(j, seq))
        for j in range(size)
    ]
    return entries + local_store.offsets(seq)


# What the last write left: (its records, whether the store is consistent, the offset it names)
LAST_WRITES = {
    "batch 3 whole": (_batch(3), True, 3),
    "batch 3's offsets, not its entries": (_batch(3, with_entries=False), False, 3),
    "batch 3's entries, batch 2's offsets": (_batch(3)[: -len(local_store.OFFSET_KEYS)], False, 2),
}


@pytest.mark.parametrize("engine", sorted(MODULES))
@pytest.mark.parametrize("last", sorted(LAST_WRITES))
def test_the_reopen_check_refuses_offsets_ahead_of_the_data_and_data_ahead_of_them(
    engine: str, last: str, tmp_path: Path
) -> None:
    pytest.importorskip(MODULES[engine])
    records, consistent, offset = LAST_WRITES[last]
    store = local_store.ENGINES[engine](tmp_path)
    for seq in range(3):
        store.write(_batch(seq))
    store.write(records)
    store.close()

    found = local_store.reopen(engine, tmp_path)

    assert found["crash_consistent"] is consistent
    assert found["crash_offset"] == offset
