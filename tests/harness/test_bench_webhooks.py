"""The webhook bench's own arithmetic: quantiles from Prometheus buckets and exposition lines,
so its wake -> commit figures mean what RESULTS.md says."""

from __future__ import annotations

import math

import pytest

from integration.bench.webhooks import bucket_quantile, percentile, runner_figures

pytestmark = pytest.mark.unit

EXPOSITION = """\
# TYPE watukuy_webhooks_total counter
watukuy_webhooks_total{connector="invoices",result="accepted"} 3.0
watukuy_webhooks_total{connector="invoices",result="unknown_tenant"} 1.0
watukuy_webhook_wake_seconds_bucket{poller="invoices",le="0.1"} 1.0
watukuy_webhook_wake_seconds_bucket{poller="invoices",le="0.5"} 3.0
watukuy_webhook_wake_seconds_bucket{poller="invoices",le="+Inf"} 4.0
watukuy_webhook_wake_seconds_sum{poller="invoices"} 2.0
watukuy_webhook_wake_seconds_count{poller="invoices"} 4.0
"""


def test_bucket_quantile_interpolates_as_prometheus_does() -> None:
    buckets = {0.1: 1.0, 0.5: 3.0, math.inf: 4.0}
    assert bucket_quantile(buckets, 0.5) == pytest.approx(0.3)  # rank 2: halfway in (0.1, 0.5]
    assert bucket_quantile(buckets, 0.25) == pytest.approx(0.1)
    assert bucket_quantile(buckets, 0.99) == 0.5  # in +Inf: the highest finite bound
    assert math.isnan(bucket_quantile({}, 0.5))


def test_runner_figures_add_both_runners() -> None:
    results, buckets, total, count = runner_figures([EXPOSITION, EXPOSITION])
    assert results == {"accepted": 6.0, "unknown_tenant": 2.0}
    assert buckets == {0.1: 2.0, 0.5: 6.0, math.inf: 8.0}
    assert (total, count) == (4.0, 8.0)


def test_percentile() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 0.5) == pytest.approx(50.5)
    assert percentile(values, 0.99) == pytest.approx(99.01)
    assert percentile([7.0], 0.99) == 7.0
    assert math.isnan(percentile([], 0.5))
