"""The per-poll series: what a scrape shows of them, by Prometheus' rules."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from watukuy.observe.series import KeyCounter, PollerHistogram

pytestmark = pytest.mark.unit


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_counter_adds_up_per_series_and_a_removed_owner_takes_its_series_along() -> None:
    registry = CollectorRegistry()
    polls = KeyCounter("demo_polls", "Polls.", ["poller", "partition", "outcome"], registry)
    polls.inc(("p", "a"), ("ok",))
    polls.inc(("p", "a"), ("ok",), 2)
    polls.inc(("p", "a"), ("timeout",))
    polls.inc(("p", "b"), ("ok",), 0)
    assert samples(registry) == {
        ("demo_polls_total", (("outcome", "ok"), ("partition", "a"), ("poller", "p"))): 3.0,
        ("demo_polls_total", (("outcome", "timeout"), ("partition", "a"), ("poller", "p"))): 1.0,
        ("demo_polls_total", (("outcome", "ok"), ("partition", "b"), ("poller", "p"))): 0.0,
    }
    polls.remove(("p", "a"))
    assert list(samples(registry)) == [
        ("demo_polls_total", (("outcome", "ok"), ("partition", "b"), ("poller", "p")))
    ]
    with pytest.raises(ValueError, match="demo_polls: counters only grow"):
        polls.inc(("p", "b"), ("ok",), -1)


def test_a_histogram_counts_a_value_on_a_bound_in_that_bucket_and_sums_what_it_saw() -> None:
    registry = CollectorRegistry()
    took = PollerHistogram("demo_seconds", "Time.", ["poller"], registry, buckets=(0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 1.0, 7.0):
        took.observe(("p",), seconds)
    found = samples(registry)
    buckets = {
        dict(labels)["le"]: value
        for (name, labels), value in found.items()
        if name == "demo_seconds_bucket"
    }
    assert buckets == {"0.1": 2.0, "1.0": 4.0, "+Inf": 5.0}
    assert found[("demo_seconds_count", (("poller", "p"),))] == 5.0
    assert found[("demo_seconds_sum", (("poller", "p"),))] == pytest.approx(8.65)
