"""The fault suite's verifier detects what it must: a duplicated event, a lost one, a gap or a
repeat in a key's sequence, a phantom version, a committed state behind its events; and it
does not call a version superseded before its retry a loss."""

from __future__ import annotations

from integration.faults.report import Result, table
from integration.faults.verify import Cursor, SeenEvent, TenantTruth, check, check_dead_letters

KEY = "invoices/t_0001"


def stream(*pairs: tuple[str, str], key: str = KEY, first: int = 1) -> list[SeenEvent]:
    return [
        SeenEvent(key, subject, version, sequence, partition=0, offset=sequence * 2)
        for sequence, (subject, version) in enumerate(pairs, start=first)
    ]


def cursor_of(events: list[SeenEvent]) -> Cursor:
    versions = {e.subject: e.version for e in events}
    return Cursor(events[-1].sequence if events else 0, versions)


SERVED = [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1")]
FINAL = {"a": "a2", "b": "b1", "c": "c1"}
TRUTH = {KEY: TenantTruth(SERVED, FINAL)}


def test_a_clean_stream_passes() -> None:
    events = stream(*SERVED)
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert verdict.ok, verdict.problems
    assert (verdict.events_verified, verdict.duplicates, verdict.losses) == (4, 0, 0)


def test_a_duplicated_event_fails() -> None:
    events = stream(*SERVED, ("b", "b1"))  # b1 published twice, with a sequence of its own
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert not verdict.ok
    assert verdict.duplicates == 1
    assert any("b version b1 published 2 times" in p for p in verdict.problems)


def test_a_repeated_sequence_number_is_a_duplicate() -> None:
    events = stream(*SERVED)
    events.append(SeenEvent(KEY, "c", "c1", 4, partition=0, offset=99))  # a zombie's copy
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert not verdict.ok
    assert verdict.duplicates == 1  # one event repeating both version and sequence: one
    assert any("sequence 4 repeated" in p for p in verdict.problems)


def test_a_missing_event_fails() -> None:
    events = stream(("a", "a1"), ("a", "a2"), ("c", "c1"))  # b1 never published
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert not verdict.ok
    assert verdict.losses == 1
    assert any("b version b1 was served, never published" in p for p in verdict.problems)


def test_a_superseded_version_is_not_a_loss() -> None:
    # a1 was served to a poll whose transaction aborted; a2 was served on the retry.
    events = stream(("b", "b1"), ("a", "a2"), ("c", "c1"))
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert verdict.ok, verdict.problems
    assert (verdict.superseded, verdict.losses, verdict.events_verified) == (1, 0, 3)


def test_the_last_version_of_an_item_must_arrive() -> None:
    # a2 was served last and never published: a1's event does not make up for it.
    events = stream(("a", "a1"), ("b", "b1"), ("c", "c1"))
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert verdict.losses == 1
    assert any("a version a2" in p for p in verdict.problems)


def test_a_final_version_never_served_means_the_runners_did_not_catch_up() -> None:
    events = stream(*SERVED)
    truth = {KEY: TenantTruth(SERVED, FINAL | {"d": "d1"})}
    verdict = check(events, truth, {KEY: cursor_of(events)})
    assert verdict.losses == 1
    assert any("final version d1 of d" in p for p in verdict.problems)


def test_a_gap_in_the_sequence_fails() -> None:
    events = stream(("a", "a1"), ("b", "b1"))
    events += stream(("a", "a2"), ("c", "c1"), first=4)  # sequence 3 is missing
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert not verdict.ok
    assert any("sequence 4 at offset 8, expected 3" in p for p in verdict.problems)


def test_an_event_for_a_version_never_served_fails() -> None:
    events = stream(*SERVED, ("b", "b9"))
    verdict = check(events, TRUTH, {KEY: cursor_of(events)})
    assert not verdict.ok
    assert any("b version b9, never served" in p for p in verdict.problems)


def test_events_of_a_key_without_ground_truth_fail() -> None:
    events = stream(*SERVED) + stream(("x", "x1"), key="invoices/t_9999")
    verdict = check(events, TRUTH, {KEY: cursor_of(events[:4])})
    assert not verdict.ok
    assert any("invoices/t_9999" in p for p in verdict.problems)


def test_a_committed_state_behind_its_events_fails() -> None:
    events = stream(*SERVED)
    behind = Cursor(3, {"a": "a2", "b": "b1"})
    verdict = check(events, TRUTH, {KEY: behind})
    assert not verdict.ok
    assert any("committed sequence 3, last event's is 4" in p for p in verdict.problems)
    assert any("snapshot disagrees" in p for p in verdict.problems)


def test_events_without_a_committed_state_fail() -> None:
    verdict = check(stream(*SERVED), TRUTH, {})
    assert any("no committed state" in p for p in verdict.problems)


def test_a_removed_tenant_is_checked_against_what_was_served() -> None:
    events = stream(*SERVED)
    truth = {KEY: TenantTruth(SERVED, None)}  # removed: no final versions to wait for
    assert check(events, truth, {KEY: cursor_of(events)}).ok
    lost = check(events[:3], truth, {KEY: cursor_of(events[:3])})
    assert lost.losses == 1


def test_the_table_names_every_column_and_the_problems() -> None:
    rows = [
        Result("rolling-bounces", 4, 4000, 0, 0, 12, 4.5, True),
        Result("zombie", 1, 10, 1, 0, 0, None, False, ["invoices/t_1: sequence 4 repeated"]),
    ]
    text = table(rows)
    header = text.splitlines()[0]
    for column in ("scenario", "rounds", "events verified", "duplicates", "losses"):
        assert column in header
    assert "aborted records seen" in header and "recovery s" in header
    assert "| zombie " in text and "NO" in text and "4.5" in text
    assert "- zombie: invoices/t_1: sequence 4 repeated" in text


def test_each_poisoned_version_has_one_dead_letter() -> None:
    poisoned = {KEY: [("p", "p1"), ("q", "q1"), ("p", "p2")]}
    letters = [b'{"etag":"p2"}', b'{"etag":"q1"}', b'{"etag":"q1"}']  # q1 twice; p1 superseded
    verdict = check(stream(*SERVED), TRUTH, {KEY: cursor_of(stream(*SERVED))})
    check_dead_letters(letters, poisoned, verdict)
    assert (verdict.duplicates, verdict.losses) == (1, 0)
    missing = check(stream(*SERVED), TRUTH, {KEY: cursor_of(stream(*SERVED))})
    check_dead_letters([b'{"etag":"p1"}', b'{"etag":"q1"}'], poisoned, missing)
    assert missing.losses == 1  # p2, the last version of p, has no letter
    assert any("poisoned p version p2: no dead letter" in p for p in missing.problems)
