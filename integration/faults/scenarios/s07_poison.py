"""Poison: 1% of the items are served malformed (no ``id``), schema-invalid (an ``amount`` the
invoice schema refuses), oversized (larger than the events topic's ``max.message.bytes``), or
oversized and malformed at once; items change all along, so poisoned items come back in new
versions, poisoned again.

Each poisoned version must appear exactly once in ``<prefix>.dlq.invoices`` with the triage
headers of its kind (``invalid`` at stage ``poll``, naming the field or, for an oversized one,
``max.message.bytes``, with the original size and hash), and nothing else may be in the DLQ;
every other version passes the verifier. An oversized item takes no sequence number (the store
measures each event before it is numbered), so every tenant's sequence stays gap-free.
Full profile: 10 tenants of 5,000 items; short: 5 tenants of 200 (which hold every kind).
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter, defaultdict
from itertools import zip_longest

from integration.faults.harness import POLLER_NAME, FaultContext, result
from integration.faults.report import Result
from integration.faults.scenarios.declarative import (
    DeadLetter,
    dead_letters,
    declarative_pool,
    invoices,
)
from integration.faults.vendor import Mutator, Simulator
from integration.faults.verify import (
    TenantTruth,
    Verdict,
    check,
    read_cursors,
    read_events,
    settle_transactions,
)
from integration.faults.watch import EventWatch
from integration.runners import wait_for

NAME = "poison"
RATE = 0.01
_ETAG = re.compile(r'"etag":"([0-9a-f]{16})"')

# What each kind of poison must look like in the DLQ: (kind, stage) and a word of the error.
EXPECTED = {
    "malformed": ("invalid", "poll", "id"),
    "schema": ("invalid", "poll", "amount"),
    "oversized": ("invalid", "poll", "max.message.bytes"),
    "oversized_malformed": ("invalid", "poll", "id"),
}

Poisoned = dict[str, dict[tuple[str, str], str]]  # tenant -> (id, version) -> kind


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    tenants, items = (10, 5000) if full else (5, 200)
    sim = ctx.simulator(tenants, items)
    for tenant in sim.tenants():
        sim.set_faults(tenant, poison_rate=RATE)
    with declarative_pool(ctx, "poison", sim, poller=invoices()) as pool:
        pool.start(2 if full else 1)
        watch = ctx.watch(pool)
        began = time.monotonic()
        with Mutator(sim, every=0.01 if full else 0.05):
            time.sleep(20 if full else 3)
        # Poisoned items changed once their first version was dealt with: poisoned again.
        wait_caught_up(sim, pool.bootstrap, pool.prefix, watch, 240 if full else 60)
        changed = change_poisoned(sim, 20 if full else 4)
        poisoned = wait_caught_up(sim, pool.bootstrap, pool.prefix, watch, 120 if full else 60)
        caught_up = time.monotonic() - began
        codes = pool.stop_all()
        problems = [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
        letters = dead_letters(pool.bootstrap, pool.prefix)
        problems += check_letters(letters, poisoned)
        verdict = verify_with_letters(sim, pool.bootstrap, pool.prefix, poisoned, letters)
        count = sum(len(versions) for versions in poisoned.values())
        kinds = Counter(kind for versions in poisoned.values() for kind in versions.values())
        if set(kinds) != set(EXPECTED):
            problems.append(f"not every kind of poison was served: {dict(kinds)}")
        if changed == 0:
            problems.append("no poisoned item was there to change")
        print(
            f"{NAME}: {count} poisoned versions ({changed} items changed once), {dict(kinds)}, "
            f"{len(letters)} dead letters",
            file=sys.stderr,
        )
        return result(NAME, verdict, rounds=1, recovery_s=caught_up, problems=problems)


def change_poisoned(sim: Simulator, count: int) -> int:
    """Update up to ``count`` poisoned items, taking each kind in turn; how many."""
    by_kind: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for tenant, versions in poisoned_versions(sim).items():
        for (item, _), kind in versions.items():
            by_kind[kind].append((tenant, item))
    turns = zip_longest(*by_kind.values())
    chosen = [pair for turn in turns for pair in turn if pair is not None][:count]
    for tenant, item in chosen:
        sim.update_item(tenant, item, amount=0.5)
    return len(chosen)


def poisoned_versions(sim: Simulator) -> Poisoned:
    out: Poisoned = {}
    for tenant in sim.known_tenants():
        entries = sim.call("GET", f"/_admin/tenants/{tenant}/poisoned")
        out[tenant] = {(e["id"], e["version"]): e["kind"] for e in entries}
    return out


def wait_caught_up(
    sim: Simulator, bootstrap: str, prefix: str, watch: EventWatch, timeout: float
) -> Poisoned:
    """Until every intact item's final version has an event and the latest poisoned version
    of every poisoned item has its dead letter; the poisoned versions then."""

    def done() -> Poisoned | None:
        finals = sim.final_versions()
        lettered = {etag_of(letter) for letter in dead_letters(bootstrap, prefix)}
        # Read last: a version is served before its letter is written, so every letter read
        # above is about a version this log holds.
        poisoned = poisoned_versions(sim)
        bad_ids = {t: {i for i, _ in versions} for t, versions in poisoned.items()}
        intact = {
            t: {i: v for i, v in items.items() if i not in bad_ids.get(t, set())}
            for t, items in finals.items()
        }
        if not watch.has_all(intact):
            return None
        for tenant, items in finals.items():
            for item in bad_ids.get(tenant, set()):
                if items.get(item) not in lettered:
                    return None
        return poisoned

    return wait_for(done, timeout, "every intact version published, every poisoned one a letter", 1)


def etag_of(letter: DeadLetter) -> str | None:
    """The item version a dead letter is about: the ``etag`` in its item's JSON (a cut item
    keeps its head, where the keys before ``name`` are)."""
    found = _ETAG.search(letter.letter.get("item") or "")
    return found.group(1) if found else None


def check_letters(letters: list[DeadLetter], poisoned: Poisoned) -> list[str]:
    """Each poisoned version has one letter with the triage headers of its kind, unless a
    later version of the same item has one (the earlier one was served to a poll that did not
    commit, then the item changed); no letter is about anything else."""
    problems: list[str] = []
    by_version: dict[str, list[DeadLetter]] = defaultdict(list)
    for letter in letters:
        by_version[etag_of(letter) or "?"].append(letter)
    expected = {
        version: (tenant, item, kind)
        for tenant, versions in poisoned.items()
        for (item, version), kind in versions.items()
    }
    for version in sorted(by_version.keys() - expected.keys()):
        kinds = [letter.kind for letter in by_version[version]]
        problems.append(f"a dead letter ({kinds}) for version {version}, never served poisoned")
    for tenant, versions in sorted(poisoned.items()):
        later: set[str] = set()
        for (item, version), kind in reversed(list(versions.items())):
            found = by_version.get(version, [])
            if len(found) > 1:
                problems.append(f"{tenant}: {item} version {version}: {len(found)} letters")
            if not found:
                if item not in later:
                    problems.append(f"{tenant}: {item} version {version} ({kind}): no letter")
                continue
            later.add(item)
            problems += triage_problems(found[0], tenant, item, kind)
    return problems


def triage_problems(letter: DeadLetter, tenant: str, item: str, kind: str) -> list[str]:
    raw, expected_kind = letter.raw, EXPECTED[kind]
    want_kind, want_stage, word = expected_kind
    where = f"{tenant}: {item} ({kind})"
    problems = []
    got = (raw.header("watukuy.kind"), raw.header("watukuy.stage"))
    if got != (want_kind, want_stage):
        problems.append(f"{where}: letter is {got}, expected {(want_kind, want_stage)}")
    if raw.header("watukuy.partition") != tenant or raw.header("watukuy.poller") != POLLER_NAME:
        problems.append(f"{where}: letter names {raw.header('watukuy.partition')}")
    if raw.key != f"{POLLER_NAME}/{tenant}".encode():
        problems.append(f"{where}: letter keyed {raw.key!r}")
    message = raw.header("watukuy.error.message") or ""
    if word not in message or not raw.header("watukuy.error.class"):
        problems.append(f"{where}: error {raw.header('watukuy.error.class')}: {message[:200]}")
    if raw.header("watukuy.attempts") is None:
        problems.append(f"{where}: no watukuy.attempts header")
    if kind == "oversized" and raw.header("watukuy.identity") != item:
        problems.append(f"{where}: an oversized item's letter does not name it")
    if raw.header("watukuy.cursor") is None:
        problems.append(f"{where}: invalid letter without its cursor")
    if kind.startswith("oversized") and raw.header("watukuy.original.sha256") is None:
        problems.append(f"{where}: an oversized item's letter is not cut with its hash")
    return problems


def verify_with_letters(
    sim: Simulator, bootstrap: str, prefix: str, poisoned: Poisoned, letters: list[DeadLetter]
) -> Verdict:
    """The verifier, told that poisoned items have no event (their letters are checked apart)."""
    topics = [f"{prefix}.{t}" for t in ("state", "items", "parked")]
    topics += [f"{prefix}.events.{POLLER_NAME}", f"{prefix}.dlq.{POLLER_NAME}"]
    hanging = settle_transactions(bootstrap, topics, 20)
    events, aborted = read_events(bootstrap, prefix, POLLER_NAME)
    finals = sim.final_versions()
    truth: dict[str, TenantTruth] = {}
    for tenant in sim.known_tenants():
        bad = {item for item, _ in poisoned.get(tenant, {})}
        final = finals.get(tenant)
        kept = None if final is None else {i: v for i, v in final.items() if i not in bad}
        truth[f"{POLLER_NAME}/{tenant}"] = TenantTruth(sim.served(tenant), kept)
    verdict = check(events, truth, read_cursors(bootstrap, prefix))
    verdict.aborted_seen = aborted
    for tp, (stable, high) in sorted(hanging.items(), key=lambda i: (i[0].topic, i[0].partition)):
        verdict.problem(f"{tp.topic}[{tp.partition}]: a transaction is hanging ({stable}/{high})")
    return verdict
