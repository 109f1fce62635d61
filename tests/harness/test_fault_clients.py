"""The fault suite's fault specs and the fault runner's options (integration/faults)."""

from __future__ import annotations

import pytest

from integration.faults.clients import Fault, parse_fault
from integration.faults.runner import faults_of


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("abortable@commit", Fault("abortable", "commit")),
        ("fatal@begin,after=3", Fault("fatal", "begin", after=3)),
        ("crash@committed, after=20", Fault("crash", "committed", after=20)),
        ("crash@dlq,after=1,times=2", Fault("crash", "dlq", after=1, times=2)),
        ("hold@commit,seconds=0.3", Fault("hold", "commit", times=None, seconds=0.3)),
        ("abortable@send_offsets,times=every", Fault("abortable", "send_offsets", times=None)),
        ("lose-state@begin,after=2", Fault("lose-state", "begin", after=2)),
    ],
)
def test_a_spec_reads_as_the_fault_it_names(spec: str, expected: Fault) -> None:
    assert parse_fault(spec) == expected
    assert parse_fault(str(expected)) == expected  # the form shown in logs reads back


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("commit", "must look like ACTION@POINT"),
        (
            "explode@commit",
            "fault action 'explode': must be one of abortable, fatal, crash, hold, lose-state",
        ),
        ("crash@flush", "fault point 'flush': must be one of begin, produce, send_offsets"),
        ("crash@commit,after=-1", "fault after=-1: must be 0 or more"),
        ("crash@commit,after=two", "invalid literal for int()"),
        ("crash@commit,times=0", "must be 1 or more, or 'every'"),
        ("crash@commit,when=now", "unknown option 'when=now' (after, times, seconds)"),
        ("hold@commit", "fault hold: needs seconds=S"),
        ("crash@commit,seconds=1", "seconds= is for hold only"),
        ("fatal@committed", "librdkafka reports no error after a commit that succeeded"),
        ("lose-state@commit", "lose-state: strikes at begin only"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^fault ") as caught:
        parse_fault(spec)
    assert message in str(caught.value)


def test_the_runner_options_become_faults_and_the_rest_goes_to_watukuy_source_run() -> None:
    faults, cli = faults_of(
        ["--config", "r.yaml", "--hold-transaction", "0.3", "--crash-at", "produce", "--after", "5"]
    )
    assert faults == [
        Fault("hold", "commit", times=None, seconds=0.3),
        Fault("crash", "produce", after=5),
    ]
    assert cli == ["--config", "r.yaml"]

    faults, cli = faults_of(
        ["--debug", "--config", "r.yaml", "--fail-at", "commit", "--fatal", "--after", "2"]
    )
    assert faults == [Fault("fatal", "commit", after=2)]
    assert cli == ["--config", "r.yaml", "--debug"]

    faults, _ = faults_of(["--config", "r.yaml", "--fault", "abortable@dlq,times=every"])
    assert faults == [Fault("abortable", "dlq", times=None)]
    assert faults_of(["--config", "r.yaml"])[0] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fail-at", "commit"], "--fail-at needs --fatal or --abortable"),
        (["--abortable"], "--fatal and --abortable go with --fail-at"),
        (["--crash-at", "nowhere"], "invalid choice: 'nowhere'"),
        (["--fault", "crash@commit,after=x"], "fault 'crash@commit,after=x'"),
        (["--fail-at", "committed", "--fatal"], "librdkafka reports no error after a commit"),
    ],
)
def test_bad_runner_options_end_with_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        faults_of(["--config", "r.yaml", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
