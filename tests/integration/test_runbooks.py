"""Every command of docs/runbooks.md, run as written against the real broker, the vendor
simulator and real runner processes, with the effect each runbook promises checked.

The commands read the shell variables the runbooks document (``$CONFIG``, ``$REST``,
``$BOOTSTRAP``, ``$PREFIX``, ``$TENANT``, ``$DATE``, ``$NEW_CONFIG``, ``$NEW_REST``,
``$RUNNER_PID``, ``$TOPIC``, ``$PARTITION``, ``$START``); these tests set them to their own
broker, runners and tenants, and substitute nothing else. Kafka's ``kafka-transactions.sh``
is on their PATH, as an operator has Kafka's ``bin/`` on theirs. A command that fails is run
again for a while (the runbooks say which ones fail until something happened); a line ending
``# keeps running`` is started as a process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from integration.demo import Simulator
from tests.integration.kafka_support import latest_values, open_transaction, read_to_end
from tests.integration.runners import ROOT, Runner, assignments, free_port, runner_env, wait_for
from tests.runbooks_doc import KEEPS_RUNNING, Block, blocks, run_blocks
from watukuy.core.keys import key_text
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

TENANTS, ITEMS = 6, 4
SESSION = "6s"  # the runners' session timeout: a stopped instance's keys move after it
DEADLINE = 60.0  # generous: the machine is shared; every wait is for a condition
PARTITIONS = 8  # the runners' topics.partitions
HANGING = "A partition waits for a hanging transaction"  # run by a test of its own
LOCAL = "The local state store"  # run by a test of its own, with runner.state.dir set


@dataclass
class Instance:
    name: str
    config: Path
    rest: str
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass
class Book:
    """Runs the runbooks' blocks with the documented variables in the environment."""

    env: dict[str, str]
    workdir: Path
    ran: list[Block] = field(default_factory=list)
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self, section: str, index: int, **variables: str) -> list[str]:
        """Run block ``index`` of ``section``; each command's stdout (a daemon's: '')."""
        block = run_blocks(section)[index]
        self.ran.append(block)
        env = {**self.env, **variables}
        out = []
        for command in block.commands():
            if command.rstrip().endswith(KEEPS_RUNNING):
                self.daemons.append(self.start(command, env))
                out.append("")
            else:
                out.append(self.until_ok(command, env))
        return out

    def start(self, command: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"daemon-{len(self.daemons)}.log").open("ab")
        process = subprocess.Popen(
            ["bash", "-c", "exec " + command], env=env, cwd=self.workdir, stdout=log, stderr=log
        )
        reap(process)
        return process

    def until_ok(self, command: str, env: dict[str, str]) -> str:
        deadline = time.monotonic() + DEADLINE
        while True:
            done = shell(command, env, self.workdir)
            if done.returncode == 0:
                return done.stdout
            assert time.monotonic() < deadline, (
                f"{command!r} kept failing ({done.returncode}): {done.stderr[-2000:]}"
            )
            time.sleep(0.5)

    def again(
        self, section: str, index: int, command: int, until: Callable[[str], Any], **variables: str
    ) -> Any:
        """Command ``command`` of a block already run, run again until ``until(stdout)``."""
        text = run_blocks(section)[index].commands()[command]
        env = {**self.env, **variables}
        last = [""]

        def check() -> Any:
            last[0] = self.until_ok(text, env)
            return until(last[0])

        try:
            return wait_for(check, DEADLINE, f"{text!r} to show it")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; it last printed:\n{last[0][-3000:]}") from None


def shell(command: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the process in the background, so that once it exits ``kill -0 PID`` fails
    (an unreaped child would linger as a zombie and ``while kill -0`` would never end)."""
    threading.Thread(target=process.wait, daemon=True).start()


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def admin(sim: Simulator, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        sim.base_url + "/_admin/" + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


def events(bootstrap: str, prefix: str) -> dict[str, list[dict[str, Any]]]:
    """The invoices events committed so far, per partition key, in offset order."""
    resolver = SchemaTopicResolver(bootstrap, f"{prefix}.schemas")
    try:
        decode = event_decoder(resolve=resolver)
        found: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in read_to_end(bootstrap, [f"{prefix}.events.invoices"]):
            if record.value is not None:
                event = decode(record.value).to_dict()
                found[event["partition"]].append(event)
        return found
    finally:
        resolver.close()


def write_runner(
    tmp: Path, bootstrap: str, prefix: str, name: str, state_dir: Path | None = None
) -> tuple[Path, str]:
    port = free_port()
    runner: dict[str, Any] = {"id": name, "session.timeout": SESSION, "commit.interval": "100ms"}
    if state_dir is not None:
        runner["state.dir"] = str(state_dir)
    config = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": prefix, "partitions": PARTITIONS},
        "runner": runner,
        "rest": {"listen": f"127.0.0.1:{port}"},
        "pollers": [
            {
                "name": "invoices",
                "partitions": {
                    "http": {
                        "url": "${env:WATUKUY_VENDOR_URL}/tenants",
                        "records": "tenants",
                        "key": "id",
                        "data": {"slug": "slug", "token": "token"},
                    },
                    "refresh": "3s",  # each instance's own listing: a new tenant's owner sees it
                },
                "request": {
                    "url": "${env:WATUKUY_VENDOR_URL}/{partition.data.slug}/items",
                    "query": {"limit": 100},
                    "auth": {"bearer": "{partition.data.token}"},
                },
                "records": "data",
                "identity": "id",
                "version": "etag",
                "paginate": {"next_token": {"path": "next", "param": "cursor"}},
                # A time cursor, so a replay can start from a date.
                "cursor": {"timestamp": {"field": "updated_at", "param": "updated_since"}},
                "schedule": {"min": "1s", "max": "5s"},
                "schema": "invoice.avsc",
            }
        ],
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, f"http://127.0.0.1:{port}"


def healthy(rest: str) -> bool:
    try:
        with urllib.request.urlopen(rest + "/health", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


@pytest.fixture
def book(kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path) -> Iterator[Book]:
    assert shutil.which("curl") and shutil.which("jq"), "the runbooks need curl and jq"
    env = runner_env(simulator.base_url)
    env.pop("PYTHONPATH")  # the runbooks' commands need only what watukuy installs
    # watukuy's commands, and Kafka's bin/ (kafka-transactions.sh) as an operator has it.
    tools = [str(Path(sys.executable).parent), str(ROOT / "integration" / "kafka" / "bin")]
    env["PATH"] = os.pathsep.join([*tools, env.get("PATH", "")])
    env.update(BOOTSTRAP=kafka_bootstrap, PREFIX=prefix)
    shutil.copy(ROOT / "schemas" / "examples" / "invoice.avsc", tmp_path / "invoice.avsc")
    made = Book(env, tmp_path)
    yield made
    codes = []
    for process in made.daemons:
        if process.poll() is None:
            process.terminate()
        try:
            codes.append(process.wait(60))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait(10))
    assert all(code == 0 for code in codes), codes


def test_every_runbook_runs_as_written(
    book: Book, simulator: Simulator, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    bootstrap = kafka_bootstrap
    tenants = [t["id"] for t in simulator.tenants]
    replayed, poisoned, removed = tenants[0], tenants[1], tenants[2]
    # The vendor starts sending tenant 1's amounts as text, which the schema refuses.
    poison = {"poison_rate": 1.0, "poison_kinds": ["schema"]}
    admin(simulator, "POST", f"tenants/{poisoned}/faults", poison)
    instances = []
    for name in ("runner-1", "runner-2"):
        config, rest = write_runner(tmp_path, bootstrap, prefix, name)
        runner = Runner(name, config, book.env, tmp_path / f"{name}.log").start()
        assert runner.process is not None
        reap(runner.process)
        book.daemons.append(runner.process)  # stopped at the end whatever happens
        instances.append(Instance(name, config, rest, runner.process))
    book.env.update(CONFIG=str(instances[0].config), REST=instances[0].rest)
    wait_for(lambda: all(healthy(i.rest) for i in instances), DEADLINE, "both runners' /health")
    healthy_tenants = [t for t in tenants if t != poisoned]
    wait_for(
        lambda: all(len(events(bootstrap, prefix)[t]) == ITEMS for t in healthy_tenants),
        DEADLINE,
        "every healthy tenant's backlog",
    )

    add_a_tenant(book, simulator)
    remove_a_tenant(book, simulator, removed, bootstrap, prefix)
    replay_a_tenant(book, simulator, replayed, bootstrap, prefix)
    triage_parked_items(book, poisoned)
    # The fix: the schema takes amounts as text too; the instances restart one at a time.
    schema = json.loads((tmp_path / "invoice.avsc").read_text())
    for f in schema["fields"]:
        if f["name"] == "amount":
            f["type"] = ["null", "double", "string"]
    (tmp_path / "invoice.avsc").write_text(json.dumps(schema))
    instances = [rolling_upgrade(book, instance) for instance in instances]
    retry_parked_items(book, poisoned, bootstrap, prefix)
    scale_out_and_in(book, tmp_path, bootstrap, prefix, instances)
    what_to_alert_on(book)

    # Across all of it: every key's sequence gap-free from 1; no event twice but the replays.
    final = events(bootstrap, prefix)
    for key, found in final.items():
        assert [e["sequence"] for e in found] == list(range(1, len(found) + 1)), key
        if key != replayed:
            assert len({e["id"] for e in found}) == len(found), key
    ran = {(b.section, b.text) for b in book.ran}
    own = {HANGING, LOCAL}  # each run by a test of its own
    every = {(b.section, b.text) for b in blocks() if b.run and b.section not in own}
    assert ran == every, "a runbook block was not run"


def add_a_tenant(book: Book, sim: Simulator) -> None:
    section = "Add a tenant"
    tenant = admin(sim, "POST", "tenants", {"items": 3})["id"]  # it now exists at the vendor
    book.run(section, 0, TENANT=tenant)
    book.again(section, 0, 1, lambda text: f" {tenant} " in text, TENANT=tenant)  # in status
    printed = book.again(
        section, 0, 2, lambda text: len(json_lines(text)) == 3 and text, TENANT=tenant
    )
    assert [e["sequence"] for e in json_lines(printed)] == [1, 2, 3]
    assert {e["type"] for e in json_lines(printed)} == {"created"}


def remove_a_tenant(book: Book, sim: Simulator, tenant: str, bootstrap: str, prefix: str) -> None:
    admin(sim, "DELETE", f"tenants/{tenant}")  # gone from the vendor's tenants list
    book.run("Remove a tenant for good", 0, TENANT=tenant)

    mine = [b"invoices", tenant.encode()]  # the key, its items' and parked items' keys

    def live_records() -> list[bytes]:
        found = []
        for topic in ("state", "items", "parked"):
            values = latest_values(bootstrap, f"{prefix}.{topic}")
            found += [k for k, v in values.items() if v is not None and k.split(b"/")[:2] == mine]
        return found

    wait_for(lambda: not live_records(), DEADLINE, "every record of the key to be deleted")


def replay_a_tenant(book: Book, sim: Simulator, tenant: str, bootstrap: str, prefix: str) -> None:
    section = "Replay a tenant from a date"
    stamps = sorted(
        item["updated_at"] for item in admin(sim, "GET", f"tenants/{tenant}/items")["data"]
    )
    # A date with some of the tenant's items on or after it and some before.
    days = sorted({datetime.fromisoformat(s.replace("Z", "+00:00")).date() for s in stamps})
    cut: date = days[-1] if len(days) > 1 else days[0] - timedelta(days=1)
    since = datetime.combine(cut, datetime.min.time(), UTC).isoformat().replace("+00:00", "Z")
    expected = sum(1 for s in stamps if s >= since)
    before = events(bootstrap, prefix)[tenant]
    assert len(before) == ITEMS

    book.run(section, 0, TENANT=tenant, DATE=cut.isoformat())
    printed = book.again(
        section,
        0,
        1,
        lambda text: len(json_lines(text)) == ITEMS + expected and text,
        TENANT=tenant,
    )
    again = json_lines(printed)[ITEMS:]
    by_id = {e["id"]: e for e in before}
    assert {e["id"] for e in again} <= set(by_id)  # the same ids as the first time
    assert all(by_id[e["id"]]["data"]["updated_at"] >= since for e in again), again
    assert [e["sequence"] for e in again] == list(range(ITEMS + 1, ITEMS + expected + 1))

    book.run(section, 1, TENANT=tenant)  # from the beginning: every item once more
    wait_for(
        lambda: len(events(bootstrap, prefix)[tenant]) == 2 * ITEMS + expected,
        DEADLINE,
        "the replay from the beginning",
    )


def triage_parked_items(book: Book, tenant: str) -> None:
    section = "Triage and retry parked items from the DLQ"
    parked = json_lines(book.run(section, 0, TENANT=tenant)[0])
    assert len(parked) == ITEMS
    assert {p["kind"] for p in parked} == {"invalid"}
    assert all("amount" in p["error"] for p in parked), parked
    letters = book.run(section, 1, TENANT=tenant)[0].splitlines()
    mine = [line for line in letters if line.startswith(f"invoices/{tenant} ")]
    assert all("'watukuy.kind': 'invalid'" in line for line in mine), mine
    # Every parked item is there, told apart by its error. (One may be there twice: seen once
    # when its key moved between the runners as they started; reported, not asserted here.)
    found = (re.search(r"'watukuy.error.message': (.+?), 'watukuy", line) for line in mine)
    errors = {m.group(1) for m in found if m}
    assert len(errors) == ITEMS, letters


def rolling_upgrade(book: Book, instance: Instance) -> Instance:
    section = "Rolling upgrade"
    here = {"CONFIG": str(instance.config), "REST": instance.rest}
    book.run(section, 0, **here)
    book.run(section, 1, RUNNER_PID=str(instance.pid), **here)
    assert instance.process.wait(5) == 0  # a clean stop: its last transaction committed
    status = book.run(section, 2, **here)[2]
    assert "invoices" in status
    assert healthy(instance.rest)
    return Instance(instance.name, instance.config, instance.rest, book.daemons[-1])


def retry_parked_items(book: Book, tenant: str, bootstrap: str, prefix: str) -> None:
    book.run("Triage and retry parked items from the DLQ", 2, TENANT=tenant)
    found = wait_for(
        lambda: len(events(bootstrap, prefix)[tenant]) == ITEMS and events(bootstrap, prefix),
        DEADLINE,
        "the retried items' events",
    )
    assert [e["sequence"] for e in found[tenant]] == list(range(1, ITEMS + 1))
    assert all(isinstance(e["data"]["amount"], str) for e in found[tenant])


def owners(text: str) -> dict[str, int]:
    """``jq -r '.[].owner' | sort | uniq -c``: keys per owner."""
    counted = (line.split() for line in text.splitlines() if line.strip())
    return {owner: int(count) for count, owner in counted}


def scale_out_and_in(
    book: Book, tmp: Path, bootstrap: str, prefix: str, instances: list[Instance]
) -> None:
    section = "Scale out and in"
    group = f"{prefix}.runners"
    new_config, new_rest = write_runner(tmp, bootstrap, prefix, "runner-3")
    book.run(section, 0, NEW_CONFIG=str(new_config), NEW_REST=new_rest)
    new = book.daemons[-1]
    wait_for(lambda: assignments(bootstrap, group).get("runner-3"), DEADLINE, "runner-3's share")
    # The Kafka partitions it got may hold no tenant's key: it owns keys only if one hashes there.
    shown = owners(book.again(section, 0, 2, lambda text: text))
    assert set(shown) <= {"runner-1", "runner-2", "runner-3"}, shown

    book.run(section, 1, RUNNER_PID=str(new.pid))
    assert new.wait(5) == 0  # a clean stop
    # Within the session timeout and a restore, its keys belong to the others again.
    book.again(section, 1, 2, lambda text: set(owners(text)) <= {i.name for i in instances})
    book.again(section, 1, 3, lambda text: "UNASSIGNED" not in text and "RUNNING" in text)
    wait_for(
        lambda: set(assignments(bootstrap, group)) == {i.name for i in instances},
        DEADLINE,
        "the group without runner-3",
    )


def what_to_alert_on(book: Book) -> None:
    out = book.run("What to alert on", 0)[0]
    names = {line.split("{")[0].split(" ")[0] for line in out.splitlines()}
    assert names == {
        "watukuy_owned_keys",
        "watukuy_lag_seconds",
        "watukuy_circuit_state",
        "watukuy_parked_items",
    }, names


def stable_and_written(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """The partition's last stable offset and high watermark."""
    found = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation}
        )
        try:
            tp = TopicPartition(topic, partition)
            found.append(int(consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]))
        finally:
            consumer.close()
    return found[0], found[1]


def test_a_hanging_transaction_ends_as_its_runbook_says(
    book: Book, simulator: Simulator, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    bootstrap = kafka_bootstrap
    tenants = [t["id"] for t in simulator.tenants]
    stuck = partition_for(key_text("invoices", tenants[0]), PARTITIONS)
    waiting = [t for t in tenants if partition_for(key_text("invoices", t), PARTITIONS) == stuck]
    topic = f"{prefix}.state"
    # The runner's topics, made as it makes them, so that the transaction is there before it.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_topics(admin, TopicLayout(prefix, PARTITIONS, 1), [("invoices", None)])
    producer = open_transaction(bootstrap, topic, stuck, key_text("invoices", tenants[0]).encode())
    try:
        start, written = stable_and_written(bootstrap, topic, stuck)
        assert start < written
        config, rest = write_runner(tmp_path, bootstrap, prefix, "runner-1")
        log = tmp_path / "runner-1.log"
        runner = Runner("runner-1", config, book.env, log).start()
        assert runner.process is not None
        reap(runner.process)
        book.daemons.append(runner.process)
        book.env.update(CONFIG=str(config), REST=rest)
        here = {"TOPIC": topic, "PARTITION": str(stuck), "START": str(start)}

        # What the operator sees: the partition's keys wait, the other keys carry on.
        wait_for(
            lambda: f"partition {stuck}: waiting for an open transaction" in log.read_text(),
            DEADLINE,
            "the runner to wait for the open transaction",
        )
        others = [t for t in tenants if t not in waiting]
        wait_for(
            lambda: all(len(events(bootstrap, prefix)[t]) == ITEMS for t in others),
            DEADLINE,
            "the other partitions' tenants' events",
        )
        assert not any(events(bootstrap, prefix)[t] for t in waiting)
        assert f"restored partition {stuck}:" not in log.read_text()
        status = run_blocks(HANGING)[3].commands()[2]  # as step 4 runs it, before the abort
        shown = book.until_ok(status, {**book.env, **here})
        assert not any(re.search(rf"\b{re.escape(t)}\b.*RUNNING", shown) for t in waiting), shown

        described = book.run(HANGING, 0, **here)[0]
        starts = [row.split()[5] for row in described.splitlines()[1:] if row.strip()]
        assert str(start) in starts, described
        # find-hanging runs, over every topic it names (it lists nothing here: this transaction
        # is seconds old and its coordinator still counts it open; a real one is listed a
        # minute after its last write).
        found = book.run(HANGING, 1, **here)[0]
        assert found.count("StartOffset") == 5, found

        book.run(HANGING, 2, **here)  # the abort
        checked = book.run(HANGING, 3, **here)
        stable = re.search(r"last stable offset (\d+), high watermark", checked[0])
        assert stable and int(stable.group(1)) > start, checked

        # The aborted record was never and is not now read; the keys are restored and polled.
        assert b"never committed" not in latest_values(bootstrap, topic).values()
        wait_for(
            lambda: f"restored partition {stuck}:" in log.read_text(),
            DEADLINE,
            "the runner to restore the partition",
        )
        wait_for(
            lambda: all(len(events(bootstrap, prefix)[t]) == ITEMS for t in waiting),
            DEADLINE,
            "the waiting tenants' events",
        )
        for tenant in waiting:
            assert [e["sequence"] for e in events(bootstrap, prefix)[tenant]] == list(
                range(1, ITEMS + 1)
            )
        book.again(
            HANGING,
            3,
            2,
            lambda text: all(re.search(rf"\b{re.escape(t)}\b.*RUNNING", text) for t in waiting),
            **here,
        )
        assert {b.text for b in book.ran} == {b.text for b in run_blocks(HANGING)}
    finally:
        # Aborted at the partition already; the coordinator may refuse it.
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(30)


def test_the_local_state_store_runbook_runs_as_written(
    book: Book, simulator: Simulator, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    bootstrap = kafka_bootstrap
    tenants = [t["id"] for t in simulator.tenants]
    config, rest = write_runner(tmp_path, bootstrap, prefix, "runner-1", tmp_path / "state")
    runner = Runner("runner-1", config, book.env, tmp_path / "runner-1.log").start()
    assert runner.process is not None
    reap(runner.process)
    book.daemons.append(runner.process)
    book.env.update(CONFIG=str(config), REST=rest)
    wait_for(
        lambda: all(len(events(bootstrap, prefix)[t]) == ITEMS for t in tenants),
        DEADLINE,
        "every tenant's backlog",
    )
    store = tmp_path / "state" / prefix / "runner-1"

    # What the store holds: a row per Kafka partition the runner owns, once it wrote them.
    shown = book.run(LOCAL, 0)[0]
    assert shown.startswith(f"local state store {store}\nsize on disk: "), shown
    table = book.again(LOCAL, 0, 0, lambda text: len(text.splitlines()) == 3 + PARTITIONS and text)
    assert table.splitlines()[2].split()[:3] == ["PARTITION", "KEYS", "RECORDS"]
    keys = sum(int(row.split()[1]) for row in table.splitlines()[3:])
    assert keys == len(tenants), table

    # Stopped, wiped, started again: rebuilt from the topics, nothing published twice.
    out = book.run(LOCAL, 1, RUNNER_PID=str(runner.process.pid))
    assert runner.process.wait(5) == 0
    assert out[-1].startswith(f"local state store {store}"), out[-1]
    wiped = tmp_path / "daemon-1.log"  # the restarted runner's log (the book's second daemon)
    wait_for(
        lambda: wiped.exists() and wiped.read_text().count("restored partition") >= PARTITIONS,
        DEADLINE,
        "the restarted runner's restores",
    )
    book.again(
        LOCAL,
        1,
        5,
        lambda text: sum(int(r.split()[1]) for r in text.splitlines()[3:]) == len(tenants),
    )
    for tenant in tenants:
        found = events(bootstrap, prefix)[tenant]
        assert [e["sequence"] for e in found] == list(range(1, ITEMS + 1)), tenant
    assert {b.text for b in book.ran} == {b.text for b in run_blocks(LOCAL)}
