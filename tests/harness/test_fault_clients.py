"""The fault suite's fault specs and the fault runner's options (integration/faults)."""

from __future__ import annotations

import pytest

from integration.faults.clients import Fault, FaultyClients, parse_fault
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
        ("crash@grant,after=4", Fault("crash", "grant", after=4)),
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
        ("abortable@grant", "a grant's write is no transaction's; use crash or hold"),
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


class Exited(Exception):
    """What the test's ``exit`` raises instead of ending the process."""


def test_crash_at_grant_strikes_before_the_grant_that_follows_a_claim_reaches_librdkafka() -> None:
    exits: list[int] = []

    def exit_(code: int) -> None:
        exits.append(code)
        raise Exited

    clients = FaultyClients([Fault("crash", "grant", after=1)], prefix="p", exit=exit_)
    # No broker: records only wait in librdkafka's queue, and the strike comes before that.
    producer = clients.producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    queued = []

    def produce(key: str) -> None:
        producer.produce("p.credentials", b"v", key.encode(), partition=0)
        queued.append(key)  # not reached when the fault strikes: librdkafka never got it

    produce("grant/crm/acme")  # handed in from the source: no claim before it
    produce("claim/crm/acme/0")
    produce("grant/crm/acme")  # the first rotation: let through (after=1)
    produce("claim/crm/globex/0")
    produce("claim/crm/acme/1")
    producer.produce("p.state", b"v", b"grant/crm/acme")  # another topic: not a grant
    with pytest.raises(Exited):
        produce("grant/crm/acme")  # the second rotation, of a claim two records back
    assert exits == [137]
    assert queued == [
        "grant/crm/acme", "claim/crm/acme/0", "grant/crm/acme", "claim/crm/globex/0",
        "claim/crm/acme/1",
    ]  # fmt: skip
    assert clients.struck == ["crash@grant of crm/acme, grant write 2 after a claim"]
    produce("grant/crm/globex")  # times=1: struck once
    assert exits == [137]
