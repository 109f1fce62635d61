"""The Prometheus observer: names by Prometheus' rules, the partition label on and off, the
series of a key that leaves removed, key states read at scrape; and ``metrics`` config."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from watukuy.config import ConfigError, parse_config
from watukuy.core.clock import FakeClock
from watukuy.core.figures import FigureTable, parked_counts
from watukuy.core.grants import GrantRef
from watukuy.core.observe import OutcomeKind, StateFigures
from watukuy.core.poller import StreamOf, define_poller
from watukuy.observe.metrics import PrometheusObserver

pytestmark = pytest.mark.unit

Samples = list[tuple[str, dict[str, str], float]]


def scrape(observer: PrometheusObserver) -> Samples:
    body, content_type = observer.render()
    assert content_type.startswith("text/plain; version=")
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    ]


NAMED = ("connector", "stream")
"""The labels that name a poller's connector and stream: the tests of one plain poller set
them aside (:func:`test_a_stream_pollers_series_name_its_connector_and_stream` holds them)."""


def values(
    samples: Samples, name: str, *, streams: bool = False
) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted((k, v) for k, v in labels.items() if streams or k not in NAMED)): value
        for n, labels, value in samples
        if n == name
    }


NOW = 1_800_000_000.0


def held(
    *keys: tuple[str, str] | tuple[str, str, dict[str, Any]],
) -> FigureTable:
    """The figures of held keys, ``(poller, partition[, fields])``, as the engine keeps them:
    ``lag`` (5.0; ``None``: never succeeded), ``circuit``, ``parked`` (kinds of the items
    parked), ``waiting``."""
    table = FigureTable(FakeClock(NOW))
    for poller, partition, *more in keys:
        put(table, poller, partition, **(more[0] if more else {}))
    return table


def put(
    table: FigureTable,
    poller: str,
    partition: str,
    *,
    lag: float | None = 5.0,
    circuit: str = "closed",
    parked: tuple[str, ...] = (),
    waiting: bool = False,
) -> None:
    success = None if lag is None else NOW - lag
    key = f"{poller}/{partition}"
    table.put(key, poller, partition, success, circuit, parked_counts(parked), waiting)


def exercise(observer: PrometheusObserver) -> None:
    """One of every hook, for two tenants of one poller."""
    for tenant in ("t_1", "t_2"):
        observer.key_gained("invoices", tenant)
        observer.poll_decided("invoices", tenant, "live", OutcomeKind.OK, 0.2)
        observer.http_response("invoices", tenant, "GET", 200, 0.1)
        observer.page_fetched("invoices", tenant, "live", 10, False)
        observer.events_committed("invoices", tenant, "live", {"created": 10})
    observer.poll_decided("invoices", "t_2", "live", OutcomeKind.RATE_LIMITED, 0.1)
    observer.http_response("invoices", "t_2", "GET", 429, 0.1)
    observer.http_response("invoices", "t_2", "GET", None, 5.0)
    observer.item_parked("invoices", "t_2", "invalid", OutcomeKind.SCHEMA_INVALID)
    observer.dlq_written("invoices", "t_2", 1)
    observer.state_caught_up("invoices", "t_1", 3)
    observer.transactions_hanging("w.events.invoices", (4, 7))
    observer.partitions_unowned((3,))
    observer.grant_refreshed(GrantRef("invoices", "t_1"), "ok")
    observer.grant_refreshed(GrantRef("invoices", "t_2"), "refused")
    observer.webhook_received("invoices", "accepted")
    observer.wake_served("invoices", "t_1", 0.3)
    observer.circuit_moved("invoices", "t_2", "closed", "open")
    observer.budget_waited("vendor", "invoices", "t_1", "live", 0.25, 3.0)
    observer.transaction_done(True, 0.05, 12, None)
    observer.transaction_done(False, 0.5, 3, OutcomeKind.FENCED)
    observer.leases_gained((0, 1))
    observer.restore_done(0, 2, 40, 0.3)
    observer.restore_done(1, 0, 0, 0.1)
    observer.leases_lost((1,), False)


def test_names_follow_prometheus_rules() -> None:
    observer = PrometheusObserver()
    figures = held(("invoices", "t_1"))
    observer.watch(lambda: figures)
    exercise(observer)
    body = observer.render()[0].decode()
    families = list(text_string_to_metric_families(body))
    names = {family.name for family in families}
    assert {
        "watukuy_polls",
        "watukuy_items_fetched",
        "watukuy_events",
        "watukuy_http_requests",
        "watukuy_http_request_duration_seconds",
        "watukuy_throttle_waits",
        "watukuy_circuit_state",
        "watukuy_budget_tokens",
        "watukuy_budget_wait_seconds",
        "watukuy_parked_items",
        "watukuy_lag_seconds",
        "watukuy_transactions",
        "watukuy_transaction_duration_seconds",
        "watukuy_rebalances",
        "watukuy_owned_keys",
        "watukuy_restore_records",
        "watukuy_restore_duration_seconds",
        "watukuy_dlq_records",
        "watukuy_caught_up_events",
        "watukuy_hanging_transactions",
        "watukuy_unowned_partitions",
        "watukuy_grant_refreshes",
        "watukuy_webhooks",
        "watukuy_webhook_wake_seconds",
        "watukuy_tenants_needing_authorization",
        "process_cpu_seconds",
        "process_resident_memory_bytes",
    } <= names
    for family in families:
        assert family.name.startswith(("watukuy_", "process_")), family.name
        assert family.name == family.name.lower()
        if family.type == "counter":
            assert {s.name for s in family.samples} == {f"{family.name}_total"}
        if family.type == "histogram":
            assert family.name.endswith("_seconds"), family.name
        if family.name.startswith("watukuy_"):
            assert family.documentation, family.name
    assert "_created" not in body  # no doubled series per counter


def test_counters_carry_poller_and_partition() -> None:
    observer = PrometheusObserver()
    exercise(observer)
    samples = scrape(observer)
    assert values(samples, "watukuy_events_total") == {
        (("lane", "live"), ("partition", "t_1"), ("poller", "invoices"), ("type", "created")): 10,
        (("lane", "live"), ("partition", "t_2"), ("poller", "invoices"), ("type", "created")): 10,
    }
    polls = values(samples, "watukuy_polls_total")
    assert (
        polls[
            (
                ("lane", "live"),
                ("outcome", "rate_limited"),
                ("partition", "t_2"),
                ("poller", "invoices"),
            )
        ]
        == 1
    )
    assert values(samples, "watukuy_http_requests_total") == {
        (("method", "GET"), ("partition", t), ("poller", "invoices"), ("status_class", c)): 1
        for t, c in [("t_1", "2xx"), ("t_2", "2xx"), ("t_2", "4xx"), ("t_2", "none")]
    }
    assert values(samples, "watukuy_throttle_waits_total") == {
        (("partition", "t_2"), ("poller", "invoices")): 1
    }
    assert values(samples, "watukuy_items_parked_total") == {
        (
            ("kind", "invalid"),
            ("partition", "t_2"),
            ("poller", "invoices"),
            ("reason", "schema_invalid"),
        ): 1
    }
    assert values(samples, "watukuy_transactions_total") == {
        (("kind", ""), ("result", "committed")): 1,
        (("kind", "fenced"), ("result", "aborted")): 1,
    }
    assert values(samples, "watukuy_rebalances_total") == {
        (("change", "assigned"),): 2,
        (("change", "revoked"),): 1,
    }
    assert values(samples, "watukuy_leases") == {(): 1}
    assert values(samples, "watukuy_hanging_transactions") == {(("topic", "w.events.invoices"),): 2}
    assert values(samples, "watukuy_unowned_partitions") == {(): 1}
    assert values(samples, "watukuy_restore_records_total") == {(): 40}
    assert values(samples, "watukuy_budget_tokens") == {(("budget", "vendor"),): 3.0}
    assert values(samples, "watukuy_budget_wait_seconds_sum") == {
        (("budget", "vendor"), ("lane", "live")): 0.25
    }


def test_without_the_partition_label_series_aggregate_per_poller() -> None:
    observer = PrometheusObserver(partition_label=False)
    figures = held(
        ("invoices", "t_1", {"lag": 5.0, "parked": ("invalid",)}),
        ("invoices", "t_2", {"lag": 50.0, "circuit": "open", "parked": ("invalid", "invalid")}),
    )
    observer.watch(lambda: figures)
    exercise(observer)
    samples = scrape(observer)
    assert not [s for s in samples if "partition" in s[1]]
    assert values(samples, "watukuy_events_total") == {
        (("lane", "live"), ("poller", "invoices"), ("type", "created")): 20
    }
    assert values(samples, "watukuy_lag_seconds") == {(("poller", "invoices"),): 50.0}
    assert values(samples, "watukuy_circuit_state") == {
        (("poller", "invoices"), ("state", "closed")): 1,
        (("poller", "invoices"), ("state", "open")): 1,
        (("poller", "invoices"), ("state", "half-open")): 0,
    }
    assert values(samples, "watukuy_parked_items") == {
        (("kind", "invalid"), ("poller", "invoices")): 3,
        (("kind", "poison"), ("poller", "invoices")): 0,
    }
    observer.key_released("invoices", "t_2", "fenced")  # aggregates stay: they are the poller's
    assert values(scrape(observer), "watukuy_events_total") == {
        (("lane", "live"), ("poller", "invoices"), ("type", "created")): 20
    }


def test_key_states_are_read_at_each_scrape() -> None:
    figures = held(("invoices", "t_1", {"lag": 7.5, "circuit": "half-open"}))
    observer = PrometheusObserver()
    observer.watch(lambda: figures)
    scrape(observer)  # what a scrape keeps of a key's lines moves with the key
    put(figures, "invoices", "t_1", lag=7.5, circuit="half-open", parked=("poison", "poison"))
    samples = scrape(observer)
    t_1 = (("partition", "t_1"), ("poller", "invoices"))
    assert values(samples, "watukuy_lag_seconds") == {t_1: 7.5}
    assert values(samples, "watukuy_circuit_state") == {
        (*t_1, ("state", "closed")): 0,
        (*t_1, ("state", "open")): 0,
        (*t_1, ("state", "half-open")): 1,
    }
    assert values(samples, "watukuy_parked_items") == {
        (("kind", "invalid"), *t_1): 0,
        (("kind", "poison"), *t_1): 2,
    }
    assert values(samples, "watukuy_owned_keys") == {(("poller", "invoices"),): 1}
    figures.drop("invoices/t_1")  # the key left: its state series go with it
    samples = scrape(observer)
    for name in ("watukuy_lag_seconds", "watukuy_circuit_state", "watukuy_parked_items"):
        assert values(samples, name) == {}


def test_a_key_waiting_for_a_newer_release_is_counted_apart() -> None:
    """Owned but not run here: not a held key, and its fresh-looking lag, closed circuit and
    zero parked counts are not its own, so none of them is reported."""
    figures = held(
        ("invoices", "t_1"),
        ("invoices", "t_2", {"lag": None, "waiting": True}),
        ("orders", "", {"lag": None, "waiting": True}),
    )
    observer = PrometheusObserver()
    observer.watch(lambda: figures)
    samples = scrape(observer)
    invoices, orders = (("poller", "invoices"),), (("poller", "orders"),)
    assert values(samples, "watukuy_owned_keys") == {invoices: 1, orders: 0}
    assert values(samples, "watukuy_waiting_keys") == {invoices: 1, orders: 1}
    for name in ("watukuy_lag_seconds", "watukuy_circuit_state", "watukuy_parked_items"):
        shown = {(labels["poller"], labels["partition"]) for n, labels, _ in samples if n == name}
        assert shown == {("invoices", "t_1")}, name


def test_the_series_of_a_key_that_leaves_are_removed() -> None:
    observer = PrometheusObserver()
    exercise(observer)
    observer.key_released("invoices", "t_2", "fenced")
    samples = scrape(observer)
    assert not [s for s in samples if s[1].get("partition") == "t_2"]
    assert values(samples, "watukuy_events_total") == {
        (("lane", "live"), ("partition", "t_1"), ("poller", "invoices"), ("type", "created")): 10
    }
    # Back on this instance later: it counts again from zero.
    observer.events_committed("invoices", "t_2", "live", {"updated": 1})
    assert (
        values(scrape(observer), "watukuy_events_total")[
            (("lane", "live"), ("partition", "t_2"), ("poller", "invoices"), ("type", "updated"))
        ]
        == 1
    )


def test_a_key_that_comes_back_counts_from_zero_in_the_series_it_had() -> None:
    """Its series are found again by name after the first use (not through labels()): the
    ones a key had before it left are made anew when it comes back, not left unexported."""
    observer = PrometheusObserver(process=False)
    poller = define_poller(name="invoices", fetch=lambda ctx: None, identity=lambda i: i["id"])
    figures = held()
    observer.watch(lambda: figures, lambda: {"invoices": poller})
    for _ in range(3):
        observer.poll_decided("invoices", "t_1", "live", OutcomeKind.NOT_MODIFIED, 0.1)
    observer.key_released("invoices", "t_1", "fenced")
    observer.poll_decided("invoices", "t_1", "live", OutcomeKind.NOT_MODIFIED, 0.1)
    polls = values(scrape(observer), "watukuy_polls_total")
    assert list(polls.values()) == [1]
    assert values(scrape(observer), "watukuy_poll_duration_seconds_count") == {
        (("poller", "invoices"),): 4
    }


def test_two_observers_do_not_share_series() -> None:
    one, two = PrometheusObserver(process=False), PrometheusObserver(process=False)
    one.events_committed("invoices", "t_1", "live", {"created": 3})
    assert values(scrape(two), "watukuy_events_total") == {}
    assert not [s for s in scrape(two) if s[0].startswith("process_")]


# -- config ----------------------------------------------------------------------------------


def _config(metrics: object) -> dict[str, Any]:
    config: dict[str, Any] = {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "r"},
        "pollers": [{"python": "integration.pollers:invoices"}],
    }
    if metrics is not None:
        config["metrics"] = metrics
    return config


def test_the_metrics_section() -> None:
    assert parse_config(_config(None)).metrics.partition_label is True
    config = parse_config(_config({"partition_label": False}))
    assert config.metrics.partition_label is False
    assert config.describe()["metrics"] == {"partition_label": False}
    assert "metrics" not in parse_config(_config({})).describe()


@pytest.mark.parametrize(
    ("metrics", "path", "message"),
    [
        ({"partition_label": "no"}, "metrics.partition_label", "must be true or false, got a str"),
        ({"partition_labels": True}, "metrics.partition_labels", "did you mean 'partition_label'"),
        ([], "metrics", "must be a mapping"),
    ],
)
def test_a_bad_metrics_setting_names_its_path(metrics: object, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(metrics))
    assert caught.value.path == path
    assert message in str(caught.value)


def test_a_stream_pollers_series_name_its_connector_and_stream() -> None:
    tracker = dataclasses.replace(
        define_poller(name="tracker.issues", fetch=lambda ctx: [], identity=lambda item: item),
        stream_of=StreamOf("tracker", "issues"),
    )
    plain = define_poller(name="invoices", fetch=lambda ctx: [], identity=lambda item: item)
    pollers = {p.name: p for p in (tracker, plain)}
    for partition_label in (True, False):
        observer = PrometheusObserver(partition_label=partition_label, process=False)
        figures = held(("tracker.issues", "acme/P1"))
        observer.watch(lambda figures=figures: figures, lambda: pollers)
        observer.events_committed("tracker.issues", "acme/P1", "live", {"created": 2})
        observer.events_committed("invoices", "t_1", "live", {"created": 1})
        observer.http_response("tracker.issues", "acme/P1", "GET", 200, 0.1)
        samples = scrape(observer)
        key = {"partition": "acme/P1"} if partition_label else {}
        stream = {"poller": "tracker.issues", "connector": "tracker", "stream": "issues", **key}
        own = {"poller": "invoices", "connector": "invoices", "stream": ""}
        own |= {"partition": "t_1"} if partition_label else {}
        events = values(samples, "watukuy_events_total", streams=True)
        assert events == {
            tuple(sorted({**stream, "lane": "live", "type": "created"}.items())): 2,
            tuple(sorted({**own, "lane": "live", "type": "created"}.items())): 1,
        }
        lag = values(samples, "watukuy_lag_seconds", streams=True)
        assert lag == {tuple(sorted(stream.items())): 5.0}
        owned = values(samples, "watukuy_owned_keys", streams=True)
        assert owned == {
            (("connector", "tracker"), ("poller", "tracker.issues"), ("stream", "issues")): 1
        }
        latency = {
            labels["stream"]
            for n, labels, _ in samples
            if n == "watukuy_http_request_duration_seconds_count"
        }
        assert latency == {"issues"}


def test_where_state_lives_is_read_at_each_scrape() -> None:
    figures = [StateFigures(snapshot_keys=3, snapshot_entries=1500, snapshot_hits=7)]
    observer = PrometheusObserver(process=False)
    observer.watch_state(lambda: figures[-1])
    samples = scrape(observer)
    assert values(samples, "watukuy_snapshot_cache_keys") == {(): 3}
    assert values(samples, "watukuy_snapshot_cache_entries") == {(): 1500}
    assert values(samples, "watukuy_snapshot_cache_hits_total") == {(): 7}
    assert values(samples, "watukuy_local_state_bytes") == {}  # no local state store

    figures.append(
        StateFigures(
            snapshot_loads=2,
            snapshot_entry_reads=50,
            disk_bytes=4096,
            standby_partitions=4,
            standby_lag=120,
            restored_from_disk=900,
        )
    )
    samples = scrape(observer)
    assert values(samples, "watukuy_snapshot_cache_loads_total") == {(): 2}
    assert values(samples, "watukuy_snapshot_entry_reads_total") == {(): 50}
    assert values(samples, "watukuy_local_state_bytes") == {(): 4096}
    assert values(samples, "watukuy_standby_partitions") == {(): 4}
    assert values(samples, "watukuy_standby_lag_records") == {(): 120}
    assert values(samples, "watukuy_restore_records_from_disk_total") == {(): 900}


def test_tenants_needing_authorization_are_counted_until_a_grant_is_handed_in() -> None:
    observer = PrometheusObserver(process=False)
    for tenant, result in [("a", "refused"), ("b", "lost"), ("c", "ok"), ("a", "failed")]:
        observer.grant_refreshed(GrantRef("crm", tenant), result)
    body = observer.render()[0].decode()
    assert 'watukuy_tenants_needing_authorization{connector="crm"} 2.0' in body
    assert 'watukuy_grant_refreshes_total{connector="crm",result="lost"} 1.0' in body
    observer.grant_refreshed(GrantRef("crm", "a"), "handed_in")
    body = observer.render()[0].decode()
    assert 'watukuy_tenants_needing_authorization{connector="crm"} 1.0' in body
    assert 'result="handed_in"' not in body
    # A runner started since learns it from the store at the tenant's next look, not a refresh.
    fresh = PrometheusObserver(process=False)
    fresh.grant_refreshed(GrantRef("crm", "b"), "needs_authorization")
    body = fresh.render()[0].decode()
    assert 'watukuy_tenants_needing_authorization{connector="crm"} 1.0' in body
    assert "watukuy_grant_refreshes_total{" not in body
