"""``webhook:`` on a connector entry or a poller on its own (CONTRACT.md, "Webhooks wake
tenants"): parsed at load onto the pollers, every bad field a ``ConfigError`` naming its path,
secrets redacted, one path per connector."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from watukuy.config import parse_config
from watukuy.control.connectors import compile_connector
from watukuy.core.errors import ConfigError
from watukuy.core.webhooks import Hmac, NoVerify, Stripe, Wake
from watukuy.core.webhookset import hooks_by_path, hooks_of, webhook_of
from watukuy.declarative import compile_connector_entry, compile_poller
from watukuy.declarative.shown import shown
from watukuy.options.flat import flatten, unflatten

pytestmark = pytest.mark.unit

BASE = Path(".")
HOOK: dict[str, Any] = {
    "path": "/webhooks/tracker",
    "verify": {"hmac": {"secret": "s3cr3t-value", "header": "X-Signature", "prefix": "sha256="}},
    "tenant": {"header": "X-Tenant"},
    "streams": [
        {
            "when": {"path": "type", "matches": r"issue\..*"},
            "stream": "issues",
            "key": "{body.issue.project_id}",
        },
        {"stream": "projects"},
    ],
}


def tracker(**hook: Any) -> dict[str, Any]:
    webhook = {**copy.deepcopy(HOOK), **hook}
    return {
        "name": "tracker",
        "partitions": {"static": [{"key": "acme", "data": {"hook": "k"}}]},
        "defaults": {"request": {"base": "http://127.0.0.1:9"}, "records": "data"},
        "streams": [
            {"name": "projects", "request": {"path": "/projects"}, "identity": "id"},
            {
                "name": "issues",
                "request": {"path": "/projects/{parent.key}/issues"},
                "identity": "id",
                "parent": {"stream": "projects", "key": "id"},
            },
            {"name": "users", "request": {"path": "/users"}, "identity": "id"},
        ],
        "webhook": {k: v for k, v in webhook.items() if v is not None},
    }


def poller(**webhook: Any) -> dict[str, Any]:
    return {
        "name": "tickets",
        "request": {"url": "http://127.0.0.1:9/t"},
        "identity": "id",
        "webhook": {"path": "/hooks/tickets", "verify": "none", **webhook},
    }


def compile_entry(entry: dict[str, Any]) -> list[Any]:
    return compile_connector_entry(entry, where="pollers[0]", base_dir=BASE)


def error_of(entry: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        compile_entry(entry)
    return raised.value


# -- where the spec lives ---------------------------------------------------------------------


def test_every_stream_of_a_connector_carries_its_one_spec() -> None:
    pollers = compile_entry(tracker())
    specs = {id(webhook_of(p)) for p in pollers}
    assert len(specs) == 1
    spec = webhook_of(pollers[0])
    assert spec is not None and spec.path == "/webhooks/tracker"
    assert isinstance(spec.verify, Hmac) and spec.verify.secret == b"s3cr3t-value"
    [hook] = hooks_of(pollers)
    assert (hook.connector, hook.streams) == ("tracker", ("projects", "users"))
    body = {"type": "issue.updated", "issue": {"project_id": "P1"}}
    assert hook.wakes("acme", body) == [Wake("issues", "acme/P1")]
    assert hook.poller_of(Wake("issues", "acme/P1")) == "tracker.issues"
    assert hook.wakes("acme", {"type": "x"}) == [Wake("projects", "acme")]


def test_a_poller_on_its_own_carries_its_spec_and_wakes_itself() -> None:
    [tickets] = compile_entry(poller())
    assert webhook_of(tickets) is not None
    [hook] = hooks_of([tickets])
    assert hook.wakes("", {}) == [Wake(None, "")]
    assert hook.poller_of(Wake(None, "")) == "tickets"
    assert webhook_of(compile_poller(poller(), where="p", base_dir=BASE)) is not None


def test_without_a_webhook_nothing_is_carried() -> None:
    entry = tracker()
    del entry["webhook"]
    assert hooks_of(compile_entry(entry)) == []


def test_the_config_file_and_rest_find_the_same_hooks() -> None:
    config = {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "r"},
        "pollers": [tracker(), poller()],
    }
    cfg = parse_config(config)
    assert sorted(hooks_by_path(cfg.pollers)) == ["/hooks/tickets", "/webhooks/tracker"]
    rest = compile_connector("tracker", {k: v for k, v in tracker().items() if k != "name"}, BASE)
    assert [h.spec.path for h in hooks_of(rest)] == ["/webhooks/tracker"]


def test_two_connectors_cannot_share_a_webhook_path() -> None:
    other = poller(path="/webhooks/tracker")
    config = {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "r"},
        "pollers": [tracker(), other],
    }
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    assert raised.value.path == "pollers[1].webhook.path"
    assert "pollers[0]" in str(raised.value)
    with pytest.raises(ConfigError, match="also connector 'tracker'"):
        hooks_by_path([*compile_entry(tracker()), *compile_entry(other)])


# -- errors naming their path -----------------------------------------------------------------


def test_a_webhook_without_verify_is_an_error_saying_how_to_accept_unsigned_ones() -> None:
    raised = error_of(tracker(verify=None))
    assert raised.path == "pollers[0].webhook.verify"
    assert "write verify: none to accept unsigned webhooks" in str(raised)


def test_verify_none_written_out_accepts_unsigned_webhooks() -> None:
    spec = webhook_of(compile_entry(tracker(verify="none"))[0])
    assert spec is not None and spec.verify == NoVerify()


STRIPE = {"stripe": {"secret": "whsec_x"}}


@pytest.mark.parametrize(
    ("hook", "path", "message"),
    [
        ({"verify": {**HOOK["verify"], **STRIPE}}, "webhook.verify", "found hmac and stripe"),
        ({"verify": {}}, "webhook.verify", "set exactly one of: hmac, stripe"),
        ({"verify": "nothing"}, "webhook.verify", "or none"),
        ({"verify": {"hmac": {"header": "X"}}}, "webhook.verify.hmac.secret", "required"),
        (
            {"verify": {"hmac": {"header": "X", "secret": "a", "secret_from": "{x}"}}},
            "webhook.verify.hmac.secret_from",
            "not both",
        ),
        ({"verify": {"hmac": {"secret": "a"}}}, "webhook.verify.hmac.header", "required"),
        (
            {"verify": {"hmac": {"secret": "a", "header": "X", "encoding": "hexa"}}},
            "webhook.verify.hmac.encoding",
            "hex, base64",
        ),
        (
            {"verify": {"stripe": {"secret": "a", "tolerance": 300}}},
            "webhook.verify.stripe.tolerance",
            "",
        ),
        (
            {"verify": {"stripe": {"secret_from": "{partition.key}"}}},
            "webhook.verify.stripe.secret_from",
            "partition.data.NAME",
        ),
        ({"verify": {"stripe": {"secret": "a", "tolrance": "5m"}}}, "webhook.verify.stripe", ""),
        ({"path": "webhooks"}, "webhook.path", "starting with '/'"),
        ({"path": "/"}, "webhook.path", "starting with '/'"),
        ({"path": "/connectors/tracker/hook"}, "webhook.path", "REST's own routes"),
        ({"path": "/admin/loggers"}, "webhook.path", "REST's own routes"),
        ({"path": "/health"}, "webhook.path", "REST's own routes"),
        ({"path": "/metrics"}, "webhook.path", "REST's own routes"),
        ({"path": "/openapi.json"}, "webhook.path", "REST's own routes"),
        ({"path": "/hooks/{name}"}, "webhook.path", "starting with '/'"),
        ({"path": None}, "webhook.path", "required"),
        ({"tenant": None}, "webhook.tenant", "required with partitions"),
        ({"tenant": {"header": "X", "path": "a"}}, "webhook.tenant", "found header and path"),
        ({"tenant": {"path": "a..b"}}, "webhook.tenant.path", ""),
        ({"streams": []}, "webhook.streams", "non-empty list"),
        ({"streams": [{"stream": "nope"}]}, "webhook.streams[0].stream", "projects, issues"),
        ({"streams": [{"stream": "issues"}]}, "webhook.streams[0].key", "set key"),
        (
            {"streams": [{"stream": "users", "key": "{body.id}"}]},
            "webhook.streams[0].key",
            "only a child",
        ),
        (
            {"streams": [{"stream": "issues", "key": "{item.id}"}]},
            "webhook.streams[0].key",
            "only {body.PATH}",
        ),
        (
            {"streams": [{"stream": "issues", "key": "P1"}]},
            "webhook.streams[0].key",
            "must read the body",
        ),
        (
            {"streams": [{"stream": "issues", "key": "{body.a"}]},
            "webhook.streams[0].key",
            "unbalanced",
        ),
        (
            {"streams": [{"when": {"path": "type", "matches": "issue.("}, "stream": "users"}]},
            "webhook.streams[0].when.matches",
            "invalid regex",
        ),
        (
            {"streams": [{"when": {"path": "type"}, "stream": "users"}]},
            "webhook.streams[0].when.matches",
            "required",
        ),
        ({"streams": [{"stream": "users", "wen": {}}]}, "webhook.streams[0]", "wen"),
        ({"pth": "/x"}, "webhook", "pth"),
    ],
)
def test_each_bad_field_is_an_error_at_its_path(
    hook: dict[str, Any], path: str, message: str
) -> None:
    raised = error_of(tracker(**hook))
    assert raised.path == f"pollers[0].{path}" or (raised.path or "").startswith(
        f"pollers[0].{path}."
    ), str(raised)
    assert message in str(raised)


def test_a_secrets_value_never_appears_in_an_error() -> None:
    secret = "hunter2-canary"
    hook = {"hmac": {"secret": secret, "header": "X", "encoding": 7}}
    raised = error_of(tracker(verify=hook))
    assert secret not in str(raised)


def test_webhook_is_not_a_key_of_defaults() -> None:
    entry = tracker()
    entry["defaults"]["webhook"] = {"path": "/w", "verify": "none"}
    assert error_of(entry).path == "pollers[0].defaults.webhook"


def test_a_streams_own_webhook_wakes_that_stream_alone() -> None:
    entry = tracker(path="/webhooks/all")
    own = {"path": "/webhooks/users", "verify": "none", "tenant": {"header": "X-Tenant"}}
    entry["streams"][2]["webhook"] = own
    hooks = hooks_by_path(compile_entry(entry))
    assert sorted(hooks) == ["/webhooks/all", "/webhooks/users"]
    users = hooks["/webhooks/users"]
    assert users.wakes("acme", {"type": "issue.updated"}) == [Wake("users", "acme")]
    assert users.poller_of(Wake("users", "acme")) == "tracker.users"


def test_a_streams_own_webhook_names_no_other_stream_and_a_childs_needs_a_key() -> None:
    entry = tracker()
    entry["streams"][2]["webhook"] = {
        "path": "/webhooks/users",
        "verify": "none",
        "tenant": {"header": "X-Tenant"},
        "streams": [{"stream": "projects"}],
    }
    assert error_of(entry).path == "pollers[0].streams[2].webhook.streams[0].stream"
    entry = tracker()
    entry["streams"][1]["webhook"] = {
        "path": "/webhooks/issues",
        "verify": "none",
        "tenant": {"header": "X-Tenant"},
    }
    assert error_of(entry).path == "pollers[0].streams[1].webhook.streams"
    entry["streams"][1]["webhook"]["streams"] = [{"stream": "issues", "key": "{body.p}"}]
    hook = hooks_by_path(compile_entry(entry))["/webhooks/issues"]
    assert hook.wakes("acme", {"p": "P1"}) == [Wake("issues", "acme/P1")]


def test_a_poller_on_its_own_takes_no_tenant_without_partitions_and_no_rules() -> None:
    raised = error_of(poller(tenant={"header": "X-Tenant"}))
    assert raised.path == "pollers[0].webhook.tenant"
    raised = error_of(poller(streams=[{"stream": "x"}]))
    assert raised.path == "pollers[0].webhook.streams"
    hooked = poller(verify={"hmac": {"secret_from": "{partition.data.k}", "header": "X"}})
    assert error_of(hooked).path == "pollers[0].webhook.verify.hmac.secret_from"


def test_stripe_defaults_and_a_per_tenant_secret() -> None:
    hook = {"stripe": {"secret_from": "{partition.data.hook}"}}
    spec = webhook_of(compile_entry(tracker(verify=hook))[0])
    assert spec is not None and isinstance(spec.verify, Stripe)
    assert (spec.verify.header, spec.verify.tolerance) == ("Stripe-Signature", 300.0)
    assert spec.verify.secret is None and spec.needs_tenant_data


# -- shown, flat form -------------------------------------------------------------------------


def test_an_inline_secret_is_redacted_where_the_entry_is_shown() -> None:
    text = str(shown(tracker()))
    assert "s3cr3t-value" not in text
    hook = tracker(verify={"stripe": {"secret": "whsec_canary"}})
    assert "whsec_canary" not in str(shown(hook))


@pytest.mark.parametrize("verify", [HOOK["verify"], "none", STRIPE])
def test_the_webhook_block_round_trips_through_connects_flat_form(verify: Any) -> None:
    entry = tracker(verify=verify)
    flat = flatten(entry, "http")
    assert all(isinstance(v, str) for v in flat.values())
    assert unflatten(flat) == ("http", entry)
    if verify == "none":
        assert flat["webhook.verify"] == "none"
    assert not any(re.match(r"webhook\.streams\.", key) for key in flat)


def test_secret_from_beside_the_kind_as_the_contract_writes_it() -> None:
    verify = {"hmac": {"header": "X-Signature"}, "secret_from": "{partition.data.hook}"}
    [first, *_] = compile_entry(tracker(verify=verify))
    spec = webhook_of(first)
    assert spec is not None and isinstance(spec.verify, Hmac)
    assert spec.verify.secret is None and spec.verify.secret_from is not None
    both = {
        "hmac": {"header": "X-Signature", "secret": "s"},
        "secret_from": "{partition.data.hook}",
    }
    assert error_of(tracker(verify=both)).path == "pollers[0].webhook.verify.secret_from"
