"""The local state store on disk (RocksDB): what it keeps, what it gives back to a restore, and
when it wipes itself (saying why). No broker: the store is plain files."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from watukuy.core.errors import ConfigError
from watukuy.store.kafka.disk import DiskCopy
from watukuy.store.kafka.local import LocalIdentity, LocalState
from watukuy.store.kafka.notifications import Record
from watukuy.store.kafka.restore import RestoredKeys
from watukuy.store.kafka.topics import TopicLayout

pytestmark = pytest.mark.unit

LAYOUT = TopicLayout("wk", 4, 1)
STATE, ITEMS, PARKED = LAYOUT.state, LAYOUT.items, LAYOUT.parked
IDENTITY = LocalIdentity("wk", ("id-s", "id-i", "id-p"), 4)
NOW = 1_800_000_000_000
DAY = 86_400_000
WIDE = {STATE: (0, 100), ITEMS: (0, 100), PARKED: (0, 100)}


def _store(path: Path, identity: LocalIdentity = IDENTITY) -> LocalState:
    return LocalState.open(path, LAYOUT, identity)


def _seed(store: LocalState, kafka_partition: int = 1) -> None:
    store.write(
        kafka_partition,
        [
            (STATE, b"inv/t1", b"state-1", 1234),
            (ITEMS, b"inv/t1/a", b"item-a", 0),
            (ITEMS, b"inv/t1/b", b"item-b", 0),
            (PARKED, b"inv/t1/x", b"parked-x", 0),
        ],
        {STATE: 5, ITEMS: 9, PARKED: 2},
        now_ms=NOW,
    )


def test_a_reopened_store_gives_back_its_records_and_offsets_tombstones_applied(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _seed(store)
    store.write(1, [(ITEMS, b"inv/t1/b", None, 0)], {ITEMS: 11}, now_ms=NOW)
    store.close()

    store = _store(tmp_path)
    resumed = store.resume(1, WIDE, now_ms=NOW + 1000, max_age_ms=DAY)
    store.close()
    assert resumed is not None
    offsets, records = resumed
    assert offsets == {STATE: 5, ITEMS: 11, PARKED: 2}
    assert sorted(records) == [
        (ITEMS, b"inv/t1/a", b"item-a", 0),
        (PARKED, b"inv/t1/x", b"parked-x", 0),
        (STATE, b"inv/t1", b"state-1", 1234),
    ]


def test_partitions_are_kept_apart_and_wiped_apart(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _seed(store, 1)
    _seed(store, 255)  # its prefix ends in 0xff: its range must still be its own
    _seed(store, 256)
    store.wipe(255)
    assert store.resume(255, WIDE, now_ms=NOW, max_age_ms=DAY) is None
    for kafka_partition in (1, 256):
        resumed = store.resume(kafka_partition, WIDE, now_ms=NOW, max_age_ms=DAY)
        assert resumed is not None and len(resumed[1]) == 4
    assert [p.kafka_partition for p in store.info().partitions] == [1, 256]
    store.close()


def test_a_store_for_other_topics_is_wiped_at_open_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    _seed(store)
    store.close()
    caplog.set_level(logging.WARNING, logger="watukuy.local")
    other = LocalIdentity("wk", ("id-s", "id-i2", "id-p"), 4)
    store = _store(tmp_path, other)
    assert store.resume(1, WIDE, now_ms=NOW, max_age_ms=DAY) is None
    store.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "written for other topics" in lines[0]

    store = _store(tmp_path, other)  # now it is this identity's: kept
    _seed(store)
    store.close()
    store = _store(tmp_path, other)
    assert store.resume(1, WIDE, now_ms=NOW, max_age_ms=DAY) is not None
    store.close()


def test_a_corrupt_store_is_wiped_and_opens_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    _seed(store)
    store.close()
    (tmp_path / "CURRENT").write_text("MANIFEST-999999\n")  # names a manifest that is not there
    caplog.set_level(logging.WARNING, logger="watukuy.local")
    store = _store(tmp_path)
    assert store.resume(1, WIDE, now_ms=NOW, max_age_ms=DAY) is None
    store.close()
    assert any("cannot be opened" in r.getMessage() for r in caplog.records)


def test_a_store_in_use_by_another_process_is_refused_naming_the_setting(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        with pytest.raises(ConfigError) as caught:
            _store(tmp_path)
        assert caught.value.path == "runner.state.dir"
        assert "another process" in str(caught.value)
    finally:
        store.close()


def test_a_partition_older_than_the_tombstones_are_kept_is_wiped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    _seed(store)
    caplog.set_level(logging.WARNING, logger="watukuy.local")
    assert store.resume(1, WIDE, now_ms=NOW + DAY + 1, max_age_ms=DAY) is None
    assert store.resume(1, WIDE, now_ms=NOW, max_age_ms=DAY) is None  # gone for good
    store.close()
    assert "delete.retention.ms" in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    "bounds",
    [
        {STATE: (0, 100), ITEMS: (0, 8), PARKED: (0, 100)},  # the topic ends before it
        {STATE: (6, 100), ITEMS: (0, 100), PARKED: (0, 100)},  # records deleted after it
    ],
)
def test_offsets_outside_the_topic_wipe_the_partition(
    tmp_path: Path, bounds: dict[str, tuple[int, int]]
) -> None:
    store = _store(tmp_path)
    _seed(store)
    assert store.resume(1, bounds, now_ms=NOW, max_age_ms=DAY) is None
    store.close()


def test_a_disk_copy_seeds_a_restore_and_keeps_committed_records_with_their_offsets(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    _seed(store)
    disk = DiskCopy(store, LAYOUT, lambda: NOW / 1000, max_age_ms=DAY)
    keys = RestoredKeys()
    resumed = disk.resume(1, WIDE, keys)
    assert resumed == ({STATE: 5, ITEMS: 9, PARKED: 2}, 1)  # states only: the rest stays there
    assert keys.names() == ["inv/t1"] and keys.stamps[b"inv/t1"] == 1234
    assert keys.items == {} and keys.record_ids("inv/t1") == (["a", "b"], ["x"])

    records = [
        Record(ITEMS, b"inv/t1/c", b"item-c", 1),
        Record("wk.events.inv", b"inv/t1", b"event", None),
        Record(ITEMS, b"inv/t1/a", None, 1),
    ]
    last = disk.last_records(records)
    assert last == {id(records[2]): (ITEMS, 1)}  # the last items record reports its offset
    disk.committed(records, {(ITEMS, 1): 15})
    disk.read(1, STATE, b"cmd/inv/t1/c1", b"command", 99, 7)
    disk.write()
    resumed_again = store.resume(1, WIDE, now_ms=NOW, max_age_ms=DAY)
    assert keys.record_ids("inv/t1") == (["b", "c"], ["x"])  # read from the store again
    store.close()
    assert resumed_again is not None
    offsets, stored = resumed_again
    assert offsets == {STATE: 8, ITEMS: 15, PARKED: 2}
    assert {key for _, key, _, _ in stored} == {
        b"inv/t1",
        b"cmd/inv/t1/c1",
        b"inv/t1/b",
        b"inv/t1/c",
        b"inv/t1/x",
    }


def test_a_read_from_the_start_stands_in_the_store_before_any_record_came(
    tmp_path: Path,
) -> None:
    """A standby or a restore stopped before one of its topics gave a record resumes from
    where it was, instead of finding its offsets incomplete and starting over."""
    store = _store(tmp_path)
    disk = DiskCopy(store, LAYOUT, lambda: NOW / 1000, max_age_ms=DAY)
    bounds = {STATE: (0, 10), ITEMS: (3, 50), PARKED: (0, 0)}
    assert disk.resume(2, bounds, RestoredKeys()) is None  # nothing stored: from the start
    disk.read(2, ITEMS, b"inv/t1/a", b"item-a", 0, 7)  # the items topic gave one record
    disk.write()
    resumed = store.resume(2, bounds, now_ms=NOW, max_age_ms=DAY)
    store.close()
    assert resumed is not None
    assert resumed[0] == {STATE: 0, ITEMS: 8, PARKED: 0}


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from watukuy.store.kafka.local import LocalIdentity, LocalState
    from watukuy.store.kafka.topics import TopicLayout

    layout = TopicLayout("wk", 4, 1)
    store = LocalState.open(
        Path(sys.argv[1]), layout, LocalIdentity("wk", ("id-s", "id-i", "id-p"), 4)
    )
    batch = 0
    while True:
        batch += 1
        puts = [(layout.items, b"k%03d" % i, b"%d" % batch, 0) for i in range(200)]
        offsets = {layout.items: batch, layout.state: 0, layout.parked: 0}
        if sys.argv[2] == "now":
            store.write(0, puts, offsets, now_ms=1)
        else:  # as records read are: handed to the store's writer thread
            staged = store.staged(0)
            for put in puts:
                staged.put(*put)
            staged.offsets.update(offsets)
            store.write_staged(staged, now_ms=1)
        if batch == 50:
            print("writing", flush=True)
    """
)


@pytest.mark.parametrize("how", ["now", "handed to the writer thread"])
def test_a_store_killed_while_writing_holds_whole_batches_and_their_offset(
    tmp_path: Path, how: str
) -> None:
    """SIGKILL at any point: the offset and the records it stands for were written together."""
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path), how],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"writing\n"
    time.sleep(0.3)
    child.send_signal(signal.SIGKILL)
    child.wait(10)

    store = _store(tmp_path)
    resumed = store.resume(0, WIDE | {ITEMS: (0, 10**9)}, now_ms=1, max_age_ms=DAY)
    store.close()
    assert resumed is not None
    offsets, records = resumed
    assert offsets[ITEMS] >= 50
    assert len(records) == 200
    assert {value for _, _, value, _ in records} == {b"%d" % offsets[ITEMS]}


def test_a_write_failing_on_the_writer_thread_closes_the_store_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Records read are written by the store's own thread: a write that fails there (a full
    disk, a volume gone) closes the store at the thread's next call, as one made there does,
    so its partitions are restored from the topics alone."""
    store = _store(tmp_path)
    disk = DiskCopy(store, LAYOUT, lambda: NOW / 1000, max_age_ms=DAY)
    assert disk.resume(1, WIDE, RestoredKeys()) is None
    disk.read(1, ITEMS, b"inv/t1/a", b"item-a", 0, 3)
    disk.flush()
    assert not disk.failed
    store._db.close()  # type: ignore[union-attr]  # the volume goes: every write now fails
    disk.read(1, ITEMS, b"inv/t1/b", b"item-b", 0, 4)
    disk.write()  # handed over: the thread's write fails
    disk.flush()
    assert disk.failed and not store.usable
    assert f"the local state store at {tmp_path} failed" in caplog.text
