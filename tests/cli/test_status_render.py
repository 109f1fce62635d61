"""The table ``watukuy-source status`` prints, as text: plain for scripts, with progress bars on
a terminal. No broker (tests/integration/test_status_cli.py runs the command itself)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from watukuy.control.keystatus import BackfillProgress, KeyStatus
from watukuy.control.streams import poller_named
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Poller, StreamOf, define_poller
from watukuy.status_cli import COLUMNS, render

pytestmark = pytest.mark.unit


def _status(partition: str, **changes: Any) -> KeyStatus:
    values: dict[str, Any] = {
        "poller": "invoices",
        "partition": partition,
        "state": "RUNNING",
        "owner": "runner-1",
        "lag": 42.0,
        "circuit": "closed",
        "parked": {"invalid": 0, "poison": 0},
    }
    values.update(changes)
    return KeyStatus(**values)


ROWS = [
    _status("acme"),
    _status("globex-international", state="UNASSIGNED", owner="runner-2", lag=187.0),
    _status(
        "initech",
        state="FAILED",
        circuit="open",
        parked={"poison": 3, "invalid": 1},
        last_error="HTTP 503 from GET https://api.example.com/{partition.data.slug}",
    ),
    _status(
        "",
        poller="orders",
        owner=None,
        lag=None,
        backfill=BackfillProgress(
            pages=120, items=11950, cursor="2026-02-01T00:00:00Z", fraction=0.375
        ),
    ),
    _status("zeta", backfill=BackfillProgress(pages=3, items=None, cursor={"after": "x9"})),
]


def test_plain_text_is_an_aligned_table_then_the_errors() -> None:
    lines = render(ROWS, tty=False).splitlines()
    header = lines[0]
    starts = [header.index(name) for name in COLUMNS]
    cells = [
        [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        for line in lines[:6]
    ]
    assert cells == [
        list(COLUMNS),
        ["invoices", "acme", "RUNNING", "runner-1", "42s", "closed", "0", "-"],
        ["invoices", "globex-international", "UNASSIGNED", "runner-2", "3m07s", "closed", "0", "-"],
        ["invoices", "initech", "FAILED", "runner-1", "42s", "open", "invalid=1 poison=3", "-"],
        [
            "orders",
            "''",
            "RUNNING",
            "-",
            "-",
            "closed",
            "0",
            "38%, 120 pages, 11,950 items, at 2026-02-01T00:00:00Z",
        ],
        [
            "invoices",
            "zeta",
            "RUNNING",
            "runner-1",
            "42s",
            "closed",
            "0",
            '3 pages, at {"after": "x9"}',
        ],
    ]
    for line in lines[1:6]:  # every cell starts where its header does, two spaces after the last
        assert all(line[start - 2 : start] == "  " and line[start] != " " for start in starts[1:])
    assert lines[6:] == [
        "invoices/initech: HTTP 503 from GET https://api.example.com/{partition.data.slug}"
    ]
    assert all(line == line.rstrip() for line in lines)


def test_a_key_waiting_for_a_newer_release_shows_why_it_is_unassigned() -> None:
    why = "waits for a newer release of watukuy to read its stored state: format_version 2"
    rows = [
        _status("acme", last_error="HTTP 503 (retried, then it worked)"),  # running: no line
        _status("globex", state="UNASSIGNED", lag=None, last_error=why),
    ]
    lines = render(rows, tty=False).splitlines()
    assert lines[2].split() == [
        "invoices",
        "globex",
        "UNASSIGNED",
        "runner-1",
        "-",
        "closed",
        "0",
        "-",
    ]
    assert lines[3:] == [f"invoices/globex: {why}"]


def test_a_terminal_gets_a_bar_where_the_end_is_known() -> None:
    lines = render(ROWS, tty=True).splitlines()
    assert lines[4].endswith(
        "[████████░░░░░░░░░░░░] 38% 120 pages, 11,950 items, at 2026-02-01T00:00:00Z"
    )
    assert lines[5].endswith('3 pages, at {"after": "x9"}')  # no end known: no bar
    ascii_bar = render(ROWS, tty=True, unicode=False).splitlines()[4]
    assert "[########............] 38%" in ascii_bar


def test_a_long_cursor_is_cut_in_the_table() -> None:
    row = _status("a", backfill=BackfillProgress(cursor="c" * 100))
    assert render([row], tty=False).splitlines()[1].endswith("  at " + "c" * 31 + "…")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.25, "250ms"),
        (1, "1s"),
        (59.9, "59s"),
        (60, "1m00s"),
        (3599, "59m59s"),
        (3600, "1h00m"),
        (7530, "2h05m"),
        (86400 * 3 + 3600 * 4 + 5, "3d04h"),
    ],
)
def test_lag_is_shown_in_its_largest_units(seconds: float, shown: str) -> None:
    line = render([_status("a", lag=seconds)], tty=False).splitlines()[1]
    assert line.split()[4] == shown


def test_a_connectors_streams_are_shown_together_by_connector_and_stream() -> None:
    streams = {
        "tracker.projects": StreamOf("tracker", "projects"),
        "tracker.issues": StreamOf("tracker", "issues"),
    }
    rows = [
        _status("acme", poller="tracker.projects"),
        _status("acme", poller="invoices"),
        _status("acme/P1", poller="tracker.issues"),
        _status("acme", poller="tracker.issues"),
    ]
    lines = render(rows, tty=False, streams=streams).splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["CONNECTOR", "STREAM", "PARTITION"],
        ["invoices", "-", "acme"],
        ["tracker", "issues", "acme"],
        ["tracker", "issues", "acme/P1"],
        ["tracker", "projects", "acme"],
    ]
    plain = render(rows[1:2], tty=False, streams=streams).splitlines()
    assert plain[0].split()[:2] == ["POLLER", "PARTITION"]  # no stream shown: as before


def test_the_cli_names_a_stream_and_refuses_a_connector_with_streams() -> None:
    def stream(name: str) -> Poller:
        made = define_poller(name=f"tracker.{name}", fetch=lambda ctx: [], identity=str)
        return dataclasses.replace(made, stream_of=StreamOf("tracker", name))

    pollers = {p.name: p for p in (stream("projects"), stream("issues"))}
    assert poller_named(pollers, "tracker.issues", "--poller") is pollers["tracker.issues"]
    with pytest.raises(ConfigError) as refused:
        poller_named(pollers, "tracker", "--poller")
    assert str(refused.value) == (
        "--poller: connector 'tracker' has streams, each with its own keys and events: "
        "name one (tracker.issues, tracker.projects)"
    )
    with pytest.raises(ConfigError, match="unknown poller 'nope'"):
        poller_named(pollers, "nope", "--poller")
