"""The per-poll series: what a scrape shows of them, by Prometheus' rules."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from watukuy.observe.series import KeyCounter, PollerHistogram

pytestmark = pytest.mark.unit

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(metric: KeyCounter | PollerHistogram) -> Samples:
    out: list[bytes] = []
    metric.render(out)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(b"".join(out).decode())
        for sample in family.samples
    }


def test_a_counter_adds_up_per_series_and_a_removed_owner_takes_its_series_along() -> None:
    polls = KeyCounter("demo_polls", "Polls.", ["poller", "partition", "outcome"])
    polls.inc(("p", "a"), ("ok",))
    polls.inc(("p", "a"), ("ok",), 2)
    polls.inc(("p", "a"), ("timeout",))
    polls.inc(("p", "b"), ("ok",), 0)
    assert samples(polls) == {
        ("demo_polls_total", (("outcome", "ok"), ("partition", "a"), ("poller", "p"))): 3.0,
        ("demo_polls_total", (("outcome", "timeout"), ("partition", "a"), ("poller", "p"))): 1.0,
        ("demo_polls_total", (("outcome", "ok"), ("partition", "b"), ("poller", "p"))): 0.0,
    }
    polls.remove(("p", "a"))
    assert list(samples(polls)) == [
        ("demo_polls_total", (("outcome", "ok"), ("partition", "b"), ("poller", "p")))
    ]
    with pytest.raises(ValueError, match="demo_polls: counters only grow"):
        polls.inc(("p", "b"), ("ok",), -1)


def test_a_scrape_shows_what_moved_since_the_last_one_in_the_order_the_owners_came() -> None:
    """A scrape keeps each owner's lines; the next one writes again those whose numbers
    moved, drops those removed, and adds those that came (a removed one that comes back is
    the newest)."""
    polls = KeyCounter("demo_polls", "Polls.", ["poller", "partition"])
    for owner in ("a", "b", "c", "d"):
        polls.inc(("p", owner), ())
    samples(polls)
    polls.inc(("p", "b"), (), 5)
    polls.remove(("p", "a"))
    polls.remove(("p", "c"))
    polls.inc(("p", "e"), ())
    polls.inc(("p", "a"), (), 7)
    shown = samples(polls)
    assert [(dict(labels)["partition"], value) for (_, labels), value in shown.items()] == [
        ("b", 6.0),
        ("d", 1.0),
        ("e", 1.0),
        ("a", 7.0),
    ]
    for owner in ("b", "d", "e"):  # fewer owners than gaps: the kept lines close up
        polls.remove(("p", owner))
    polls.inc(("p", "f"), (), 2)
    assert [dict(labels)["partition"] for _, labels in samples(polls)] == ["a", "f"]


@pytest.mark.parametrize("moved", [1, 5, 60, 100])
def test_a_scrape_shows_every_owner_s_number_however_many_moved(moved: int) -> None:
    """Few owners moved are written again one by one, many in the owners' order (a walk
    over all of them): either way each line has its owner's number, in the order they came."""
    polls = KeyCounter("demo_polls", "Polls.", ["poller", "partition"])
    owners = [f"k{n:03d}" for n in range(100)]
    for owner in owners:
        polls.inc(("p", owner), ())
    samples(polls)
    for n in range(0, 100, 100 // moved):
        polls.inc(("p", owners[n]), (), n + 1)
    shown = samples(polls)
    expected = [(o, 1.0 + (n + 1 if n % (100 // moved) == 0 else 0)) for n, o in enumerate(owners)]
    assert [(dict(labels)["partition"], value) for (_, labels), value in shown.items()] == expected


def test_a_histogram_counts_a_value_on_a_bound_in_that_bucket_and_sums_what_it_saw() -> None:
    took = PollerHistogram("demo_seconds", "Time.", ["poller"], buckets=(0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 1.0, 7.0):
        took.observe(("p",), seconds)
    found = samples(took)
    buckets = {
        dict(labels)["le"]: value
        for (name, labels), value in found.items()
        if name == "demo_seconds_bucket"
    }
    assert buckets == {"0.1": 2.0, "1.0": 4.0, "+Inf": 5.0}
    assert found[("demo_seconds_count", (("poller", "p"),))] == 5.0
    assert found[("demo_seconds_sum", (("poller", "p"),))] == pytest.approx(8.65)
