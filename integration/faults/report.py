"""What one fault scenario found, and the table ``python -m integration.faults`` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

COLUMNS = (
    "scenario",
    "rounds",
    "events verified",
    "duplicates",
    "losses",
    "aborted records seen",
    "recovery s",
    "ok",
)


@dataclass
class Result:
    """One scenario's outcome; ``problems`` says in words why it is not ok (empty when ok)."""

    scenario: str
    rounds: int
    events_verified: int
    duplicates: int
    losses: int
    aborted_seen: int
    recovery_s: float | None
    ok: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What a reader of the table should know that is not a failure (an operator's action)."""
    seconds: float | None = None
    """Wall time of the scenario, filled in by whoever ran it."""

    def row(self) -> list[str]:
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.1f}"
        return [
            self.scenario,
            str(self.rounds),
            str(self.events_verified),
            str(self.duplicates),
            str(self.losses),
            str(self.aborted_seen),
            recovery,
            "yes" if self.ok else "NO",
        ]


def failed(scenario: str, problem: str, rounds: int = 0) -> Result:
    """A scenario that could not get as far as a verdict (it raised, or timed out)."""
    return Result(scenario, rounds, 0, 0, 0, 0, None, False, [problem])


def table(results: Sequence[Result]) -> str:
    """A Markdown table (readable as plain text too), then each failing scenario's problems."""
    rows = [list(COLUMNS), *(r.row() for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]

    def line(cells: Sequence[str]) -> str:
        padded = (
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        return "| " + " | ".join(padded) + " |"

    out = [line(rows[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in rows[1:]]
    for result in results:
        for problem in result.problems:
            out.append(f"- {result.scenario}: {problem}")
        for note in result.notes:
            out.append(f"- {result.scenario} (note): {note}")
    return "\n".join(out)
