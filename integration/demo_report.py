"""The demo's last words: per tenant, the events seen, whether their sequence is gap-free from
1, who owned the tenant before and after the kill and what troubled it; then the verdict."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from integration.demo_pieces import gap_free
from integration.demo_vendor import Trouble
from integration.demo_watch import Seen


@dataclass(frozen=True)
class Outcome:
    seen: Seen
    tenants: list[str]
    trouble: Trouble
    throttles: Mapping[str, int]
    """Per tenant, the polls the vendor paced (the runners' ``watukuy_throttle_waits``)."""
    before: Mapping[str, str]
    """Tenant -> owner when a runner was killed (empty if none was)."""
    at_kill: Mapping[str, int]
    """Tenant -> how many of its events were printed before the kill."""
    after: Mapping[str, str]
    """Tenant -> owner in the last status table."""
    victim: str | None
    moved: set[str]
    circuit_open_at: float | None
    survivor_rc: int | None
    interrupted: bool


def summarize(outcome: Outcome, out: TextIO = sys.stdout) -> bool:
    """Print the summary; True if events arrived, a tenant moved and no sequence has a gap."""
    seen, trouble = outcome.seen, outcome.trouble
    spans = "sequences before + after kill" if outcome.victim else "sequences"
    owner = "owner before -> after" if outcome.victim else "owner"
    lines = [("tenant", "events", spans, "gap-free from 1", owner, "")]
    gaps = False
    for tenant in sorted(set(outcome.tenants) | seen.sequences.keys()):
        sequences = seen.sequences.get(tenant, [])
        good = gap_free(sequences)
        gaps = gaps or not good
        span = _spans(sequences, outcome.at_kill.get(tenant, 0) if outcome.victim else None)
        verdict = "yes" if good and sequences else "-" if good else "NO"
        before = outcome.before.get(tenant, "-")
        after = outcome.after.get(tenant, "-")
        owners = f"{before} -> {after}" + (" (moved)" if tenant in outcome.moved else "")
        owners = owners if outcome.victim else after
        lines.append((tenant, str(len(sequences)), span, verdict, owners, _note(outcome, tenant)))
    widths = [max(len(line[i]) for line in lines) for i in range(6)]
    out.write("\nsummary:\n")
    for line in lines:
        pairs = enumerate(zip(line, widths, strict=True))
        cells = [c.rjust(w) if i == 1 else c.ljust(w) for i, (c, w) in pairs]
        out.write("  " + "  ".join(cells).rstrip() + "\n")
    out.write(
        f"  {seen.total} events in all ({seen.repeated} repeated event ids, "
        f"{seen.unreadable} unreadable lines)\n"
    )
    failures = []
    if seen.total == 0:
        failures.append("no event arrived")
    if outcome.victim is None:
        first = "it was interrupted" if outcome.interrupted else "the window ended"
        failures.append(f"no runner was killed ({first} first)")
    elif not outcome.moved:
        failures.append(f"no tenant moved from {outcome.victim} to the other runner")
    if gaps or seen.repeated or seen.unreadable:
        failures.append("a tenant's sequence has a gap or a repeat")
    if outcome.survivor_rc not in (0, None):
        failures.append(f"the surviving runner exited with code {outcome.survivor_rc}")
    if outcome.circuit_open_at is None:
        out.write(f"demo: note: the status table never showed {trouble.failing}'s circuit open\n")
    if failures:
        verdict = "interrupted" if outcome.interrupted else "FAILED"
        out.write(f"demo: {verdict}: {'; '.join(failures)}\n")
    else:
        out.write(
            f"demo: ok: {len(outcome.moved)} tenant(s) moved from {outcome.victim} without a "
            "gap; every tenant's events arrived once, in order, numbered 1, 2, 3, ...\n"
        )
    out.flush()
    return not failures


def _spans(sequences: list[int], split: int | None) -> str:
    """``1..12 + 13..20``: the events printed before the kill, then after it."""
    if not sequences:
        return "-"
    parts = [sequences] if split is None else [sequences[:split], sequences[split:]]
    return " + ".join(f"{part[0]}..{part[-1]}" if part else "-" for part in parts)


def _note(outcome: Outcome, tenant: str) -> str:
    trouble = outcome.trouble
    if tenant == trouble.rate_limited:
        waits = outcome.throttles.get(tenant, 0)
        return f"rate-limited: waited {waits} times (429, Retry-After: {trouble.retry_after})"
    if tenant == trouble.failing:
        if outcome.circuit_open_at is None:
            return f"failing ({trouble.failing_status})"
        return f"failing ({trouble.failing_status}): circuit open at {outcome.circuit_open_at:.0f}s"
    return ""
