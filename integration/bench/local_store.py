"""Local state store (issue 25): RocksDB (``rocksdict``) against LMDB (``lmdb``) on our workload.

    .venv/bin/python -m integration.bench.local_store [--entries 10000000] [--keys 2000]
        [--engines rocksdb,lmdb] [--repeat 2] [--dir .watukuy/local-store-bench] [--json]

One code path for both engines through a small adapter (``write``: one atomic batch of puts,
deletes, range deletes; ``scan``: a key range), a fresh store per run, in a child process of its
own so that its RSS is that engine's alone. Keys: ``k`` + the owner part of the Kafka record
keys + NUL, then ``s`` (state, 500 bytes), ``p<id>`` (3 parked items, 200 bytes) or
``i<identity>`` (an entry: identity 14-37 bytes, value 33-52); ``o<topic>`` NUL ``<partition>``
for the offsets. Phases (``write``: the engine's calls only; ``wall``: with making the records):

1. load: batches of ``--batch`` entries with the 24 offsets (3 topics x 8 partitions); runs of
   100 entries a key, keys interleaved, identities out of order, as a restore reads them;
2. read back: each key's entries scanned into a dict and counted; 50 keys also decoded;
3. ``--commits`` page commits (50 updates, 25 new, 3 deletes, the state, 3 offsets) on random
   keys without fsync, then ``--synced-commits`` with an fsync each, for comparison;
4. ``--deletes`` keys' whole ranges deleted; scans check them and every committed key;
5. SIGKILL: a child writes numbered batches (5,000 entries every tenth, else 80), the offsets
   set to the number, saying each number once written, and is killed mid-stream; another
   child times the reopen and the offsets read, and checks that the offsets name the last
   batch whose entries are all there, that no later batch left any, and acked <= it <= acked+1.

RSS: anonymous + file-mapped (LMDB maps its file: page cache, reclaimable, yet counted in RSS
and a container's memory), peak ``VmHWM``. Disk: blocks under the store once closed. Each run
waits for a 1-minute load below ``--max-load``: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from itertools import islice, takewhile
from pathlib import Path
from typing import Any

from integration.demo import ROOT
from watukuy.core.keys import KeyId
from watukuy.core.state import SnapshotEntry
from watukuy.store.kafka.records import escape, owner_key, unescape

# Why no fsync per commit: the store is a cache of what Kafka already committed. It must
# survive a SIGKILL of the runner without running ahead of its offsets, not a power loss:
# Kafka has everything, the store is rebuilt from it. A write in the OS page cache survives a
# SIGKILL. RocksDB appends each batch to its WAL (write() before returning, ``sync`` off) and
# replays it at open up to the last whole batch (point-in-time recovery); LMDB writes its pages
# with pwrite at commit (``sync=False``, so ``metasync`` is moot; ``writemap=False``: no
# writable map of the file for a stray pointer to scribble on).
DURABILITY = "no fsync per commit (RocksDB WAL sync=False; LMDB sync=False, writemap=False)"
LMDB_MAP_SIZE = 1 << 38  # 256 GiB of address space, reserved not allocated
ROCKS_CACHE = 64 << 20  # block cache; memtables: 64 MB each, up to 3
ITEMS, ITEMS_END = b"i", b"j"
OFFSET_KEYS = [f"o{t}\x00{p:03d}".encode() for t in ("state", "items", "parked") for p in range(8)]
RUN = 100  # entries of one key in a row, as one page commit wrote them
CRASH_KEYS, CRASH_SIZES = 50, (5000, *[80] * 9)  # a restore's batch, then 9 page commits
_HEAD = struct.Struct("<dI")  # an entry's value: seen, sequence, then the version's bytes
_OFFSET = struct.Struct(">q")
Pairs = Sequence[tuple[bytes, bytes]]  # (key, value) to put, or (from, to) ranges to delete
Keys = Sequence[bytes]


@dataclass(frozen=True)
class Workload:
    entries: int = 10_000_000
    keys: int = 2000
    batch: int = 5000
    commits: int = 2000
    synced_commits: int = 200
    deletes: int = 20
    crash_batches: int = 40  # batches written before the SIGKILL: what RocksDB's WAL replays


# -- the two engines behind one adapter ---------------------------------------------------------


class Rocks:
    def __init__(self, path: Path) -> None:
        import rocksdict as r  # here, not at the top: either engine may be missing

        options = r.Options(raw_mode=True)
        options.create_if_missing(True)
        options.increase_parallelism(2)  # background jobs: the machine's 2 cores
        options.set_write_buffer_size(64 << 20)
        options.set_max_write_buffer_number(3)
        options.set_compression_type(r.DBCompressionType.lz4())
        options.set_wal_recovery_mode(r.DBRecoveryMode.point_in_time())
        table = r.BlockBasedOptions()
        table.set_block_cache(r.Cache(ROCKS_CACHE))
        table.set_cache_index_and_filter_blocks(True)  # index blocks inside the cache's bound
        options.set_block_based_table_factory(table)
        self.db = r.Rdict(str(path), options)
        self.close = self.db.close
        self._plain, self._synced = r.WriteOptions(), r.WriteOptions()
        self._synced.sync = True
        self._batch, self._bounds = r.WriteBatch, r.ReadOptions

    def write(self, puts: Pairs, dels: Keys = (), ranges: Pairs = (), sync: bool = False) -> None:
        batch = self._batch(raw_mode=True)
        for key, value in puts:
            batch.put(key, value)
        for key in dels:
            batch.delete(key)
        for lo, hi in ranges:
            batch.delete_range(lo, hi)
        self.db.write(batch, self._synced if sync else self._plain)

    def scan(self, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        bounds = self._bounds()
        bounds.set_iterate_upper_bound(hi)
        return list(self.db.items(from_key=lo, read_opt=bounds))  # type: ignore[arg-type]


class Lmdb:
    def __init__(self, path: Path) -> None:
        import lmdb

        # readahead off: a scan reads a few pages, reading ahead only fills the page cache
        self.env = lmdb.open(str(path), LMDB_MAP_SIZE, sync=False, writemap=False, readahead=False)
        self.close = self.env.close

    def write(self, puts: Pairs, dels: Keys = (), ranges: Pairs = (), sync: bool = False) -> None:
        with self.env.begin(write=True) as txn:  # one transaction: all of it or none
            cursor = txn.cursor()
            cursor.putmulti(puts, dupdata=False)
            for key in dels:
                txn.delete(key)
            for lo, hi in ranges:  # no range delete in LMDB: one cursor delete an entry
                positioned = cursor.set_range(lo)
                while positioned and cursor.key() < hi:
                    positioned = cursor.delete()
        if sync:
            self.env.sync(True)

    def scan(self, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        with self.env.begin() as txn:
            cursor = txn.cursor()
            if not cursor.set_range(lo):
                return []
            return list(takewhile(lambda pair: pair[0] < hi, cursor.iternext()))


Store = Rocks | Lmdb
ENGINES: dict[str, type[Store]] = {"rocksdb": Rocks, "lmdb": Lmdb}


# -- the records --------------------------------------------------------------------------------


def owner(k: int, kind: str = "tenant") -> bytes:
    return b"k" + owner_key(KeyId("bench", f"{kind}-{k:05d}")) + b"\x00"


def whole(prefix: bytes) -> tuple[bytes, bytes]:  # all a key holds: its prefix ends with NUL
    return prefix, prefix[:-1] + b"\x01"


def items(store: Store, prefix: bytes) -> list[tuple[bytes, bytes]]:
    return store.scan(prefix + ITEMS, prefix + ITEMS_END)


def identity(k: int, i: int) -> str:
    """A vendor id of 14-37 bytes whose order is not the order the entries come in."""
    return f"{(i * 2654435761) & 0xFFFFFFFF:08x}-{k}-{i}" + "x" * (i % 20)


def item_key(prefix: bytes, ident: str) -> bytes:
    return prefix + ITEMS + escape(ident).encode()


def item_value(i: int, seq: int) -> bytes:
    mixed = (i * 0x9E3779B97F4A7C15 + seq) & 0xFFFFFFFFFFFFFFFF
    version = f'W/"{mixed:016x}{mixed ^ seq:016x}"'[: 21 + i % 20]  # an ETag or a fingerprint
    return _HEAD.pack(1.8e9 + i, seq) + version.encode()


def decode(prefix: bytes, pairs: list[tuple[bytes, bytes]]) -> dict[str, SnapshotEntry]:
    skip, out = len(prefix) + 1, {}
    for key, value in pairs:
        seen, seq = _HEAD.unpack_from(value)
        out[unescape(key[skip:].decode())] = SnapshotEntry(value[12:].decode(), seen, seq)
    return out


def offsets(value: int, keys: Sequence[bytes] = OFFSET_KEYS) -> list[tuple[bytes, bytes]]:
    return [(key, _OFFSET.pack(value)) for key in keys]


def blob(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)  # incompressible, like encoded Avro mostly is


def counts_of(ws: Workload) -> list[int]:
    per_key, extra = divmod(ws.entries, ws.keys)
    return [per_key + (1 if k < extra else 0) for k in range(ws.keys)]


def load_pairs(ws: Workload, owners: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """Each key's state and parked items, then its entries in runs of RUN, keys interleaved."""
    for k, prefix in enumerate(owners):
        yield prefix + b"s", blob(k, 500)
        yield from ((prefix + b"p%d" % p, blob(-k - p, 200)) for p in range(3))
    counts = counts_of(ws)
    for start in range(0, max(counts), RUN):
        for k, prefix in enumerate(owners):
            for i in range(start, min(start + RUN, counts[k])):
                yield item_key(prefix, identity(k, i)), item_value(i, 0)


# -- the phases ---------------------------------------------------------------------------------


def ms_stats(name: str, seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds) or [float("nan")]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {f"{name}_p50_ms": statistics.median(ordered) * 1e3, f"{name}_p99_ms": p99 * 1e3}


def memory(when: str) -> dict[str, float]:
    names = {"VmRSS": "rss_mb", "RssAnon": "anon_mb", "RssFile": "file_mb", "VmHWM": "peak_mb"}
    with open("/proc/self/status") as status:
        lines = [line.partition(":") for line in status]
    return {f"{when}_{names[n]}": int(v.split()[0]) / 1024 for n, _, v in lines if n in names}


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def load(store: Store, ws: Workload, owners: list[bytes]) -> dict[str, Any]:
    pairs = load_pairs(ws, owners)
    started = time.perf_counter()
    writing, batches, written_bytes = 0.0, 0, 0
    while batch := list(islice(pairs, ws.batch)):
        batch += offsets(batches)
        written_bytes += sum(len(k) + len(v) for k, v in batch)
        began = time.perf_counter()
        store.write(batch)
        writing += time.perf_counter() - began
        batches += 1
    wall = time.perf_counter() - started
    per_s = {"load_per_s": ws.entries / wall, "load_write_per_s": ws.entries / writing}
    return per_s | {"load_wall_s": wall, "live_mb": written_bytes / 1e6}


def read_back(store: Store, owners: list[bytes], counts: list[int]) -> dict[str, Any]:
    times, decoding, read, wrong = [], [], 0, 0
    for k, prefix in enumerate(owners):
        began = time.perf_counter()
        entries = dict(items(store, prefix))
        times.append(time.perf_counter() - began)
        read += len(entries)
        wrong += len(entries) != counts[k]
    for prefix in owners[:50]:  # the same scans again, as the objects the engine works with
        began = time.perf_counter()
        decode(prefix, items(store, prefix))
        decoding.append(time.perf_counter() - began)
    times_ms = ms_stats("scan", times) | ms_stats("scan_decode", decoding)
    return times_ms | {"entries_read": read, "keys_wrong": wrong}


def commit_pages(
    store: Store, owners: list[bytes], span: list[list[int]], n: int, sync: bool, seq: int
) -> list[float]:
    """``n`` page commits on random keys; ``span[k]``: the key's live indices [low, high)."""
    rng, times = random.Random(seq), []
    for c in range(n):
        k = rng.randrange(len(owners))
        prefix, (low, high) = owners[k], span[k]
        changed = [rng.randrange(low + 3, high) for _ in range(50)] + list(range(high, high + 25))
        puts = [(item_key(prefix, identity(k, i)), item_value(i, seq + c)) for i in changed]
        puts += [(prefix + b"s", blob(seq + c, 500)), *offsets(seq + c, OFFSET_KEYS[k % 8 :: 8])]
        deletes = [item_key(prefix, identity(k, i)) for i in range(low, low + 3)]
        span[k] = [low + 3, high + 25]
        began = time.perf_counter()
        store.write(puts, deletes, sync=sync)
        times.append(time.perf_counter() - began)
    return times


def churn(store: Store, ws: Workload, owners: list[bytes]) -> dict[str, Any]:
    """Page commits, then range deletes; then checks that every key holds what it should."""
    span = [[0, count] for count in counts_of(ws)]
    plain = commit_pages(store, owners, span, ws.commits, False, 1)
    synced = commit_pages(store, owners, span, ws.synced_commits, True, 1 + ws.commits)
    gone = random.Random(2).sample(range(ws.keys), min(ws.deletes, ws.keys // 2))
    deleting = []
    for k in gone:
        began = time.perf_counter()
        store.write((), (), [whole(owners[k])])
        deleting.append(time.perf_counter() - began)
    left = sum(len(store.scan(*whole(owners[k]))) for k in gone)
    committed = [k for k in set(range(ws.keys)) - set(gone) if span[k][0] > 0]
    wrong = sum(len(items(store, owners[k])) != span[k][1] - span[k][0] for k in committed)
    result = ms_stats("commit", plain) | ms_stats("commit_fsync", synced)
    return result | ms_stats("range_delete", deleting) | {"deleted_left": left, "wrong": wrong}


def run_child(engine: str, path: Path, ws: Workload) -> dict[str, Any]:
    """One run's phases 1-4 on a fresh store at ``path``."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    owners = [owner(k) for k in range(ws.keys)]
    result = {"engine": engine, "entries_written": ws.entries} | memory("base")
    store = ENGINES[engine](path)
    result |= load(store, ws, owners) | memory("after_load")
    result |= read_back(store, owners, counts_of(ws))
    result |= churn(store, ws, owners) | memory("end")
    store.close()
    return result | {"disk_mb": disk_bytes(path) / 1e6}


# -- SIGKILL mid-write, and the reopen ----------------------------------------------------------


def crash_writer(engine: str, path: Path) -> None:
    """Writes numbered batches until killed, saying each number once its write returned."""
    store = ENGINES[engine](path)
    crash_owners = [owner(c, "crash") for c in range(CRASH_KEYS)]
    seq = 0
    while True:
        prefix, size = crash_owners[seq % CRASH_KEYS], CRASH_SIZES[seq % 10]
        puts = [(item_key(prefix, f"{seq}-{j}"), item_value(j, seq)) for j in range(size)]
        store.write(puts + offsets(seq))
        print(seq, flush=True)
        seq += 1


def reopen(engine: str, path: Path) -> dict[str, Any]:
    """Times the open and the offsets read, then checks the data against the offsets."""
    began = time.perf_counter()
    store = ENGINES[engine](path)
    opened = time.perf_counter()
    found = {_OFFSET.unpack(v)[0] for _, v in store.scan(b"o", b"p")}
    result = {"open_s": opened - began, "offsets_ms": (time.perf_counter() - opened) * 1e3}
    per_batch: dict[int, int] = {}
    for c in range(CRASH_KEYS):
        for _, value in items(store, owner(c, "crash")):
            seq = _HEAD.unpack_from(value)[1]
            per_batch[seq] = per_batch.get(seq, 0) + 1
    store.close()
    at = max(found)  # all 24 offsets were written by one batch: they must agree
    expected = {seq: CRASH_SIZES[seq % 10] for seq in range(at + 1)}
    consistent = len(found) == 1 and per_batch == expected
    return result | memory("reopen") | {"crash_offset": at, "crash_consistent": consistent}


def _child(args: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "connector")]))
    command = [sys.executable, "-m", "integration.bench.local_store", *args]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def _json_of(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=4 * 3600)
    if process.returncode != 0:
        raise RuntimeError(f"child {process.args!r} exited {process.returncode}")
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def sigkill_test(engine: str, path: Path, min_batches: int) -> dict[str, Any]:
    writer = _child(["--crash", engine, str(path)])
    assert writer.stdout is not None
    acked = -1
    while acked < min_batches:
        line = writer.stdout.readline()
        if not line:
            raise RuntimeError("the crash writer stopped before it was killed")
        acked = int(line)
    time.sleep(random.uniform(0, 0.05))  # somewhere in a later batch, big or small
    writer.send_signal(signal.SIGKILL)
    acked = max([acked, *map(int, writer.communicate()[0].split())])
    wal = sum(f.stat().st_size for f in path.glob("*.log"))  # RocksDB's WAL; LMDB has none
    result = _json_of(_child(["--reopen", engine, str(path)]))
    return result | {"crash_acked": acked, "wal_mb": wal / 1e6}


# -- the runs and the tables --------------------------------------------------------------------


def wait_quiet(max_load: float, patience: float) -> float:
    """The 1-minute load once it is below ``max_load`` (or after ``patience`` seconds)."""
    deadline = time.monotonic() + patience
    while (load := os.getloadavg()[0]) >= max_load and time.monotonic() < deadline:
        print(f"local_store: load {load:.2f} >= {max_load}: waiting", file=sys.stderr, flush=True)
        time.sleep(20)
    return load


def measure(engine: str, path: Path, ws: Workload) -> dict[str, Any]:
    """One run: phases 1-4 in a child, then the SIGKILL test on the same store; removes it."""
    try:
        result = _json_of(_child(["--child", engine, str(path), json.dumps(asdict(ws))]))
        result |= sigkill_test(engine, path, ws.crash_batches)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return result | {"checks": verdict(result)}


def verdict(r: dict[str, Any]) -> str:
    """What the run's own checks found: 'ok', or what went wrong."""
    faults = []
    if r["entries_read"] != r["entries_written"] or r["keys_wrong"]:
        faults.append("read back")
    if r["deleted_left"] or r["wrong"]:
        faults.append("commits/deletes")
    if not (r["crash_consistent"] and 0 <= r["crash_offset"] - r["crash_acked"] <= 1):
        faults.append("crash")
    return "ok" if not faults else "FAILED: " + ", ".join(faults)


# Two tables, as wide as a page: what each operation takes, then what the store holds.
SPEED = {
    "engine": "{engine}",
    "load start, end": "{load:.2f}, {load_end:.2f}",
    "load/s (write only)": "{load_per_s:,.0f} ({load_write_per_s:,.0f})",
    "scan p50 / p99 ms": "{scan_p50_ms:.2f} / {scan_p99_ms:.2f}",
    "scan+decode p50 ms": "{scan_decode_p50_ms:.1f}",
    "commit p50 / p99 ms": "{commit_p50_ms:.3f} / {commit_p99_ms:.3f}",
    "with fsync": "{commit_fsync_p50_ms:.2f} / {commit_fsync_p99_ms:.2f}",
    "range delete p50 / p99 ms": "{range_delete_p50_ms:.2f} / {range_delete_p99_ms:.2f}",
    "open after SIGKILL s (WAL MB)": "{open_s:.3f} ({wal_mb:.0f})",
    "offsets ms": "{offsets_ms:.2f}",
    "checks": "{checks}",
}
SPACE = {
    "engine": "{engine}",
    "disk MB (live data)": "{disk_mb:,.0f} ({live_mb:,.0f})",
    "RSS MB at start": "{base_rss_mb:.0f}",
    "after load: anon + file": "{after_load_anon_mb:.0f} + {after_load_file_mb:.0f}",
    "at end: anon + file": "{end_anon_mb:.0f} + {end_file_mb:.0f}",
    "peak": "{end_peak_mb:.0f}",
    "after reopen": "{reopen_rss_mb:.0f}",
}


def table(rows: list[dict[str, Any]], columns: dict[str, str]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + [
        "| " + " | ".join(f.format_map(r) for f in columns.values()) + " |" for r in rows
    ]


def _parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        "python -m integration.bench.local_store", None, __doc__, formatter_class=formatter
    )
    for field in fields(Workload):
        parser.add_argument("--" + field.name.replace("_", "-"), type=int, default=field.default)
    parser.add_argument("--engines", default="rocksdb,lmdb")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each engine (2)")
    parser.add_argument("--dir", type=Path, default=ROOT / ".watukuy" / "local-store-bench")
    parser.add_argument("--max-load", type=float, default=1.5, help="wait below this load")
    parser.add_argument("--patience", type=float, default=1800, help="longest wait, s")
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    for hidden in ("--child", "--crash", "--reopen"):  # what the children are told to do
        parser.add_argument(hidden, nargs="+", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child:
        engine, path, workload = args.child
        print(json.dumps(run_child(engine, Path(path), Workload(**json.loads(workload)))))
        return 0
    if args.crash:
        crash_writer(args.crash[0], Path(args.crash[1]))
    if args.reopen:
        print(json.dumps(reopen(args.reopen[0], Path(args.reopen[1]))))
        return 0
    ws = Workload(*(getattr(args, field.name) for field in fields(Workload)))
    print(f"local_store: {ws}; {DURABILITY}", file=sys.stderr, flush=True)
    rows = []
    for _ in range(args.repeat):
        for engine in args.engines.split(","):
            load = wait_quiet(args.max_load, args.patience)  # and what it was at the end:
            row = measure(engine, args.dir / engine, ws) | {"load": load}
            rows.append(row | {"load_end": os.getloadavg()[0]})
            print(table(rows, SPEED)[-1], file=sys.stderr, flush=True)
    print(f"{ws.entries:,} entries over {ws.keys:,} keys; {DURABILITY}")
    print("\n".join([*table(rows, SPEED), "", *table(rows, SPACE)]))
    if args.json:
        print(json.dumps(rows))
    return 0 if all(r["checks"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
