"""The pure helpers of the side-by-side benchmark: CPU accounting, steady window, page order."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from integration.bench import transform_row
from integration.bench.ceiling import pages
from integration.bench.cpu import CpuMeter, stat_cpu_seconds
from integration.bench.side_by_side import PIPELINES, Row, parse_args, table
from watukuy.core.events import Event


def test_stat_cpu_counts_user_system_and_waited_children_after_an_odd_command_name() -> None:
    # pid (comm) state ppid ... utime=250 stime=50 cutime=100 cstime=0 (fields 14..17)
    fields = ["S", "1"] + ["0"] * 9 + ["250", "50", "100", "0"] + ["0"] * 30
    stat = "4242 (tap) x (y)) " + " ".join(fields)
    assert stat_cpu_seconds(stat, ticks=100) == pytest.approx(4.0)


def test_the_meter_keeps_the_cpu_of_a_process_that_exited() -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    meter = CpuMeter()
    process = subprocess.Popen([sys.executable, "-c", busy])
    meter.add(process)
    while meter.running():
        time.sleep(0.01)
    assert process.returncode == 0
    assert 0.3 <= meter.seconds() < 5


def test_the_steady_window_leaves_out_start_up_and_tail() -> None:
    row = Row("x", expected=1000, seen=1000, last=12.0, cpu=9.0)
    # start-up: 5 s and 4 CPU-s before anything; then 100 events and 0.5 CPU-s a second
    row.samples = [(5.0, 0, 4.0)] + [(5.0 + t, 100 * t, 4.0 + 0.5 * t) for t in range(1, 11)]
    assert row.steady_rate == pytest.approx(100)
    assert row.steady_us_per_event == pytest.approx(5000)
    assert row.rate == pytest.approx(1000 / 12)
    assert row.us_per_event == pytest.approx(9000)


def test_a_run_in_one_batch_has_no_steady_part_and_the_table_says_so() -> None:
    row = Row("quick", expected=100, seen=100, first=1.0, last=1.0, cpu=0.2, cpu_at_first=0.2)
    row.samples = [(1.0, 100, 0.2)]
    assert "| quick | 100 | 100 | 1.0 | - |" in table([row])[-1]


def test_a_row_not_run_says_why() -> None:
    assert (
        "| singer | not run (pip could not install it) |"
        in table([Row("singer", 10, skipped="pip could not install it")])[-1]
    )


def test_pages_take_turns_between_tenants() -> None:
    backlog = {"a": [1, 2, 3], "b": [4]}
    assert list(pages(backlog, 2)) == [("a", [1, 2]), ("b", [4]), ("a", [3])]


def test_quick_profile_fills_only_what_was_not_given() -> None:
    args = parse_args(["--quick", "--items", "7"])
    assert (args.tenants, args.items, args.page) == (4, 7, 250)
    assert args.commit_seconds == pytest.approx(0.1)


def test_a_page_the_simulator_refuses_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--page", "501"])
    assert "--page must be 1..500" in capsys.readouterr().err


def test_the_transformed_row_is_a_pipeline_of_its_own() -> None:
    args = parse_args(["--quick", "--pipelines", "declarative,declarative+transform"])
    assert args.pipelines == ["declarative", "declarative+transform"]
    assert "declarative+transform" in PIPELINES


def test_the_transformed_row_publishes_its_own_schema_and_keeps_the_key_out_of_the_config(
    tmp_path: Path,
) -> None:
    source = Path(__file__).resolve().parents[2] / "schemas" / "examples" / "invoice.avsc"
    example = {"pollers": [{"name": "invoices", "schema": str(source)}]}
    config = transform_row.transformed(example, tmp_path)
    poller = config["pollers"][0]
    assert poller["transform"]["mask"] == {"name": {"hmac": "${env:WATUKUY_BENCH_MASK_KEY}"}}
    fields = [f["name"] for f in json.loads(Path(poller["schema"]).read_text())["fields"]]
    assert "created_at" not in fields and {"tenant", "source", "name"} <= set(fields)
    assert example["pollers"][0]["schema"] == str(source)  # the plain row's config untouched


def _event(partition: str, data: dict[str, Any]) -> Event:
    return Event(
        "e1", "invoices", partition, "s", "created", "v", 1, datetime.now(UTC), "", 1, data
    )


def test_the_transformed_rows_check_finds_items_the_transform_did_not_reach() -> None:
    good = {"id": "1", "name": "ab" * 32, "tenant": "t1", "source": "bench"}
    plain = {"id": "2", "name": "Blue invoice", "created_at": "2026-01-01T00:00:00Z"}
    events = {b"good": _event("t1", good), b"plain": _event("t1", plain)}
    values: list[tuple[bytes | None, bytes | None]] = [(b"t1", b"good"), (b"t1", b"plain")]
    assert transform_row.check_published(values, events.__getitem__) == [
        "created_at not dropped in 1 events",
        "name not masked in 1 events",
        "tenant not set in 1 events",
        "source not set in 1 events",
    ]
    assert transform_row.check_published(values[:1], events.__getitem__) == []


def test_the_transform_cost_is_said_against_the_plain_declarative_row() -> None:
    lines = transform_row.versus_plain(
        {"declarative": (40.0, 30.0), "declarative+transform": (46.0, 39.0)}
    )
    assert lines == [
        "declarative+transform vs declarative, CPU µs/ev: 46.0 vs 40.0, +15% "
        "(within the +20% bound)",
        "declarative+transform vs declarative, steady µs/ev: 39.0 vs 30.0, +30% "
        "(over the +20% bound)",
    ]
    assert transform_row.versus_plain({"declarative": (40.0, 30.0)}) == []


def _steady_row(name: str, us_per_event: float) -> Row:
    """A finished row of 1,000 events at 100 a second, each costing ``us_per_event``."""
    row = Row(name, expected=1000, seen=1000, first=1.0, last=11.0, cpu=1.0, cpu_at_first=0.1)
    row.samples = [(1.0 + t, 100 * t, t * 100 * us_per_event / 1e6) for t in range(11)]
    return row


def test_each_row_is_compared_with_the_ceiling_run_last_before_it() -> None:
    rows = [
        _steady_row("ceiling", 8),
        _steady_row("watukuy", 16),
        _steady_row("ceiling", 10),
        _steady_row("watukuy", 16),
        _steady_row("ceiling+headers", 12.5),
    ]

    per_cpu = [line.split("|")[11].strip() for line in table(rows)[2:]]

    assert per_cpu == ["1.00", "0.50", "1.00", "0.62", "0.80"]


def test_the_ceiling_with_headers_is_a_pipeline_of_its_own() -> None:
    args = parse_args(["--quick", "--pipelines", "ceiling,ceiling+headers"])
    assert args.pipelines == ["ceiling", "ceiling+headers"]
