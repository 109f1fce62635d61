"""``watukuy-source`` arguments, as a user types them: what ends on stderr and the exit code.

No broker here: every run stops at the config file (absent on purpose), which proves the
``--config`` given was the one read. The broker tier is tests/integration/test_cli.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from watukuy.cli import FROM_USAGE, main, parse_from
from watukuy.core.errors import ConfigError

pytestmark = pytest.mark.unit

# Each subcommand with the arguments it requires; None is the default command (run).
COMMANDS: dict[str | None, list[str]] = {
    None: [],
    "run": [],
    "validate": [],
    "reset": ["--poller", "invoices", "--partition", "acme"],
    "replay": ["--poller", "invoices", "--from", "2h"],
    "tail": ["--poller", "invoices"],
    "status": [],
    "state": ["info"],
}


def _argv(command: str | None, options: list[str], *, before: bool) -> list[str]:
    sub = [] if command is None else [command]
    if before:
        return [*options, *sub, *COMMANDS[command]]
    return [*sub, *COMMANDS[command], *options]


def _stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
@pytest.mark.parametrize("command", list(COMMANDS), ids=lambda c: c or "(run)")
def test_config_is_read_before_or_after_the_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str | None, before: bool
) -> None:
    missing = tmp_path / "absent.yaml"
    code = main(_argv(command, ["--config", str(missing)], before=before))
    assert code == 2
    assert _stderr_lines(capsys) == [f"watukuy-source: --config: config file '{missing}' not found"]


@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
@pytest.mark.parametrize("command", list(COMMANDS), ids=lambda c: c or "(run)")
def test_debug_adds_the_traceback_before_or_after_the_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str | None, before: bool
) -> None:
    missing = tmp_path / "absent.yaml"
    code = main(_argv(command, ["--debug", "--config", str(missing)], before=before))
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1] == f"watukuy-source: --config: config file '{missing}' not found"


def test_options_on_both_sides_take_the_later_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--config", "first.yaml", "validate", "--config", str(tmp_path / "second.yaml")])
    assert code == 2
    assert "second.yaml" in _stderr_lines(capsys)[0]


def test_without_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 2
    assert _stderr_lines(capsys) == ["watukuy-source: --config: is required"]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["reset", "--config", "c.yaml"],
            "watukuy-source: the following arguments are required: --poller; "
            "see 'watukuy-source reset --help'",
        ),
        (
            ["replay", "--config", "c.yaml", "--poller", "p"],
            "watukuy-source: the following arguments are required: --from; "
            "see 'watukuy-source replay --help'",
        ),
        (
            ["valdate", "--config", "c.yaml"],
            "watukuy-source: argument COMMAND: invalid choice: 'valdate' (choose from 'run', "
            "'validate', 'tail', 'reset', 'replay', 'status', 'state'); "
            "see 'watukuy-source --help'",
        ),
        (
            ["tail", "--poller", "p", "--max-messages", "many"],
            "watukuy-source: argument --max-messages: invalid int value: 'many'; "
            "see 'watukuy-source tail --help'",
        ),
        (
            ["validate", "--config", "c.yaml", "--poller", "p"],
            "watukuy-source: unrecognized arguments: --poller p; see 'watukuy-source --help'",
        ),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert _stderr_lines(capsys) == [line]


def test_max_messages_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tail", "--config", "c.yaml", "--poller", "p", "--max-messages", "0"])
    assert code == 2
    assert _stderr_lines(capsys) == ["watukuy-source: --max-messages: must be a positive integer"]


# --- replay --from ----------------------------------------------------------------------------

NOW = datetime(2026, 9, 10, 12, 30, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    ("given", "instant"),
    [
        ("2026-09-01T00:00:00Z", "2026-09-01T00:00:00Z"),
        ("2026-09-01T02:00:00+02:00", "2026-09-01T00:00:00Z"),
        ("2026-09-01T10:15:30.250-03:30", "2026-09-01T13:45:30.250000Z"),
        ("2026-09-01", "2026-09-01T00:00:00Z"),  # a date alone: midnight UTC
        ("2h", "2026-09-10T10:30:15Z"),
        ("7d", "2026-09-03T12:30:15Z"),
        ("90m", "2026-09-10T11:00:15Z"),
        (" 30s ", "2026-09-10T12:29:45Z"),
    ],
)
def test_from_accepts_a_time_with_a_zone_a_date_or_a_duration_ago(given: str, instant: str) -> None:
    assert parse_from(given, NOW) == instant


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("yesterday", f"{FROM_USAGE}, got 'yesterday'"),
        ("1756684800", f"{FROM_USAGE}, got '1756684800'"),  # epoch seconds: not guessed at
        ("2026-13-01", f"{FROM_USAGE}, got '2026-13-01'"),
        (
            "2026-09-01T00:00:00",
            "needs a time zone, e.g. 2026-09-01T00:00:00Z or 2026-09-01T00:00:00+02:00; "
            "got '2026-09-01T00:00:00'",
        ),
        ("2999-01-01", "is in the future: '2999-01-01'"),
        ("0s", "duration must be positive, got '0s'"),
    ],
)
def test_a_bad_from_names_the_option_and_exits_2(
    capsys: pytest.CaptureFixture[str], given: str, message: str
) -> None:
    # checked before the config is read: the config path here does not exist
    code = main(["replay", "--config", "absent.yaml", "--poller", "p", "--from", given])
    assert code == 2
    assert _stderr_lines(capsys) == [f"watukuy-source: --from: {message}"]


def test_from_is_in_the_future_by_the_clock_it_is_given() -> None:
    with pytest.raises(ConfigError, match="--from: is in the future: '2026-09-11'"):
        parse_from("2026-09-11", NOW)
    with pytest.raises(ConfigError, match="is in the future"):
        parse_from("2026-09-10T12:30:16Z", NOW)
