"""Webhook signatures, tenants and wakes (CONTRACT.md, "Webhooks wake tenants"): the pure core.

Signatures are computed here with :mod:`hmac`, the way GitHub and Stripe describe them; GitHub's
own example (its "Validating webhook deliveries" page) is checked as published.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.keys import key_part
from watukuy.core.paths import parse_path
from watukuy.core.webhooks import (
    Hmac,
    KeyTemplate,
    NoVerify,
    Rule,
    Stripe,
    TenantPlace,
    Wake,
    WebhookSpec,
    When,
    secret_of,
    signature_holds,
    tenant_of,
    verify_hmac,
    verify_stripe,
    wakes,
)

pytestmark = pytest.mark.unit

SECRET = b"It's a Secret to Everybody"
BODY = b'{"type":"issue.updated","account":{"id":"acme"},"issue":{"project_id":"P1"}}'
NOW = 1_700_000_000.0


def github(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def stripe(secret: bytes, body: bytes, t: int, *extra: str) -> str:
    v1 = hmac.new(secret, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return ",".join([f"t={t}", *extra, f"v1={v1}"])


# -- hmac -------------------------------------------------------------------------------------


def test_githubs_published_example_verifies() -> None:
    sent = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert verify_hmac(SECRET, b"Hello, World!", sent, encoding="hex", prefix="sha256=")


def test_a_github_style_signature_verifies_and_any_tampering_fails() -> None:
    sent = github(SECRET, BODY)
    assert verify_hmac(SECRET, BODY, sent, encoding="hex", prefix="sha256=")
    upper = "sha256=" + sent[len("sha256=") :].upper()
    assert verify_hmac(SECRET, BODY, upper, encoding="hex", prefix="sha256=")
    assert not verify_hmac(SECRET, BODY + b" ", sent, encoding="hex", prefix="sha256=")
    assert not verify_hmac(b"other", BODY, sent, encoding="hex", prefix="sha256=")
    assert not verify_hmac(SECRET, BODY, sent[:-1] + "0", encoding="hex", prefix="sha256=")
    assert not verify_hmac(SECRET, BODY, sent[len("sha256=") :], encoding="hex", prefix="sha256=")
    assert not verify_hmac(SECRET, BODY, None, encoding="hex", prefix="sha256=")
    assert not verify_hmac(SECRET, BODY, "", encoding="hex", prefix="")
    assert not verify_hmac(SECRET, BODY, "sha256=é" + sent[8:], encoding="hex", prefix="sha256=")


def test_a_base64_signature_without_prefix_verifies() -> None:
    sent = base64.b64encode(hmac.new(SECRET, BODY, hashlib.sha256).digest()).decode()
    assert verify_hmac(SECRET, BODY, sent, encoding="base64")
    assert not verify_hmac(SECRET, BODY, sent, encoding="hex")
    assert not verify_hmac(SECRET, BODY[:-1], sent, encoding="base64")


@given(st.binary(max_size=200), st.binary(min_size=1, max_size=200))
def test_any_change_to_the_body_fails_verification(body: bytes, other: bytes) -> None:
    changed = other if other != body else body + b"x"
    assert verify_hmac(SECRET, body, github(SECRET, body), encoding="hex", prefix="sha256=")
    assert not verify_hmac(SECRET, changed, github(SECRET, body), encoding="hex", prefix="sha256=")
    t = int(NOW)
    assert verify_stripe(SECRET, body, stripe(SECRET, body, t), now=NOW, tolerance=300)
    assert not verify_stripe(SECRET, changed, stripe(SECRET, body, t), now=NOW, tolerance=300)


# -- stripe -----------------------------------------------------------------------------------


def test_a_stripe_signature_verifies_within_the_tolerance_either_way() -> None:
    for t in (int(NOW), int(NOW) - 300, int(NOW) + 300):
        assert verify_stripe(SECRET, BODY, stripe(SECRET, BODY, t), now=NOW, tolerance=300)
    for t in (int(NOW) - 301, int(NOW) + 301):
        assert not verify_stripe(SECRET, BODY, stripe(SECRET, BODY, t), now=NOW, tolerance=300)


def test_a_stripe_timestamp_changed_after_signing_fails() -> None:
    sent = stripe(SECRET, BODY, int(NOW)).replace(f"t={int(NOW)}", f"t={int(NOW) + 1}")
    assert not verify_stripe(SECRET, BODY, sent, now=NOW, tolerance=300)


def test_any_of_several_v1_signatures_may_match_and_v0_is_ignored() -> None:
    t = int(NOW)
    good = stripe(SECRET, BODY, t)
    rolled = stripe(b"old secret", BODY, t, "v0=" + "0" * 64)
    both = f"{rolled},{good.split(',')[-1]}"
    assert verify_stripe(SECRET, BODY, both, now=NOW, tolerance=300)
    assert verify_stripe(b"old secret", BODY, both, now=NOW, tolerance=300)
    only_v0 = f"t={t},v0={good.split('v1=')[1]}"
    assert not verify_stripe(SECRET, BODY, only_v0, now=NOW, tolerance=300)


@pytest.mark.parametrize(
    "sent",
    [None, "", "garbage", "t=,v1=ab", "v1=ab", "t=abc,v1=ab", "t=+1700000000,v1=ab", "t=1"],
)
def test_a_malformed_stripe_header_fails(sent: str | None) -> None:
    assert not verify_stripe(SECRET, BODY, sent, now=NOW, tolerance=300)


def test_a_stripe_signature_of_another_body_fails() -> None:
    sent = stripe(SECRET, BODY, int(NOW))
    assert not verify_stripe(SECRET, BODY.replace(b"P1", b"P2"), sent, now=NOW, tolerance=300)
    assert not verify_stripe(b"whsec_other", BODY, sent, now=NOW, tolerance=300)


# -- a spec's check ---------------------------------------------------------------------------


def test_signature_holds_reads_the_header_in_any_case_and_a_missing_one_fails() -> None:
    verify = Hmac("X-Hub-Signature-256", SECRET, prefix="sha256=")
    sent = github(SECRET, BODY)
    assert signature_holds(verify, {"x-hub-signature-256": sent}, BODY, now=NOW, secret=SECRET)
    assert not signature_holds(verify, {"X-Other": sent}, BODY, now=NOW, secret=SECRET)
    assert not signature_holds(verify, {"X-Hub-Signature-256": sent}, BODY, now=NOW, secret=None)
    assert signature_holds(NoVerify(), {}, BODY, now=NOW, secret=None)
    striped = Stripe(SECRET)
    header = {"Stripe-Signature": stripe(SECRET, BODY, int(NOW))}
    assert signature_holds(striped, header, BODY, now=NOW, secret=SECRET)
    assert not signature_holds(striped, header, BODY, now=NOW + 301, secret=SECRET)


def test_a_per_tenant_secret_comes_from_partition_data() -> None:
    verify = Hmac("X-Sig", secret_from=parse_path("hooks.secret", "t"))
    assert secret_of(verify, {"hooks": {"secret": "s3"}}) == b"s3"
    assert secret_of(verify, {"hooks": {}}) is None
    assert secret_of(verify, {"hooks": {"secret": ""}}) is None
    assert secret_of(verify, None) is None
    assert secret_of(Stripe(b"whsec_x")) == b"whsec_x"
    assert secret_of(NoVerify()) is None
    spec = WebhookSpec("/h", verify, TenantPlace(header="X-Tenant"))
    assert spec.needs_tenant_data
    assert not WebhookSpec("/h", Stripe(b"k"), TenantPlace(header="X")).needs_tenant_data


def test_secrets_stay_out_of_reprs() -> None:
    spec = WebhookSpec("/h", Hmac("X-Sig", b"hunter2-secret"), None)
    assert "hunter2" not in repr(spec)
    assert "hunter2" not in repr(Stripe(b"whsec_hunter2"))


# -- tenants ----------------------------------------------------------------------------------


def test_the_tenant_comes_from_a_header_or_a_body_path() -> None:
    by_header = WebhookSpec("/h", NoVerify(), TenantPlace(header="X-Tenant"))
    assert tenant_of(by_header, {"x-tenant": "acme"}, {}) == "acme"
    assert tenant_of(by_header, {}, {}) is None
    assert tenant_of(by_header, {"X-Tenant": "  "}, {}) is None
    by_path = WebhookSpec("/h", NoVerify(), TenantPlace(path=parse_path("account.id", "t")))
    assert tenant_of(by_path, {}, {"account": {"id": "acme"}}) == "acme"
    assert tenant_of(by_path, {}, {"account": {"id": 42}}) == "42"
    for body in ({}, {"account": {"id": None}}, {"account": {"id": True}}, [1], "text"):
        assert tenant_of(by_path, {}, body) is None
    assert tenant_of(WebhookSpec("/h", NoVerify()), {}, {}) == ""


# -- wakes ------------------------------------------------------------------------------------


def _key(text: str) -> KeyTemplate:
    parts: list[Any] = []
    for literal, name in re.findall(r"([^{]*)(?:\{body\.([^}]*)\})?", text):
        if literal:
            parts.append(literal)
        if name:
            parts.append(parse_path(name, "t"))
    return KeyTemplate(text, tuple(parts))


def _type_is(pattern: str) -> When:
    return When(parse_path("type", "t"), re.compile(pattern))


RULES = (
    Rule("issues", _type_is(r"issue\..*"), _key("{body.issue.project_id}")),
    Rule("comments", _type_is(r"comment\..*"), _key("{body.project}/{body.issue}")),
    Rule("projects"),
)
SPEC = WebhookSpec("/h", NoVerify(), TenantPlace(header="X-Tenant"), RULES)
STREAMS = ("projects", "users")


def test_without_rules_every_tenant_stream_or_the_poller_itself_is_woken() -> None:
    plain = WebhookSpec("/h", NoVerify(), TenantPlace(header="X-Tenant"))
    assert wakes(plain, "acme", {}, STREAMS) == [Wake("projects", "acme"), Wake("users", "acme")]
    assert wakes(plain, "acme", {}, ()) == [Wake(None, "acme")]


def test_the_first_matching_rule_decides_and_its_key_makes_a_child_partition() -> None:
    issue = {"type": "issue.updated", "issue": {"project_id": "P1"}}
    assert wakes(SPEC, "acme", issue, STREAMS) == [Wake("issues", "acme/P1")]
    numbered = {"type": "issue.created", "issue": {"project_id": 7}}
    assert wakes(SPEC, "acme", numbered, STREAMS) == [Wake("issues", "acme/7")]
    comment = {"type": "comment.added", "project": "P1", "issue": "I7"}
    assert wakes(SPEC, "acme", comment, STREAMS) == [Wake("comments", "acme/P1/I7")]
    other = {"type": "project.renamed"}
    assert wakes(SPEC, "acme", other, STREAMS) == [Wake("projects", "acme")]


def test_when_is_a_full_match_on_a_string() -> None:
    assert wakes(SPEC, "acme", {"type": "xissue.updated"}, STREAMS) == [Wake("projects", "acme")]
    assert wakes(SPEC, "acme", {"type": ["issue.x"]}, STREAMS) == [Wake("projects", "acme")]
    only = WebhookSpec("/h", NoVerify(), None, (Rule("issues", _type_is("issue"), None),))
    assert wakes(only, "", {"type": "issue.updated"}, STREAMS) == []
    assert wakes(only, "", {"type": "issue"}, STREAMS) == [Wake("issues", "")]


@pytest.mark.parametrize(
    "project",
    [None, "", "P/1", True, 1.5, {"id": 1}, ["P1"]],
    ids=["null", "empty", "slash", "bool", "float", "mapping", "list"],
)
def test_a_missing_or_unsafe_key_wakes_nothing_and_never_falls_through(project: object) -> None:
    issue = {"type": "issue.updated", "issue": {"project_id": project}}
    assert wakes(SPEC, "acme", issue, STREAMS) == []
    assert wakes(SPEC, "acme", {"type": "issue.updated"}, STREAMS) == []


@given(st.one_of(st.text(), st.integers(), st.booleans(), st.none(), st.floats()))
def test_a_rendered_key_part_is_always_a_safe_key_part(value: object) -> None:
    found = wakes(SPEC, "acme", {"type": "issue.x", "issue": {"project_id": value}}, STREAMS)
    if key_part(value) is None:
        assert found == []
    else:
        assert found == [Wake("issues", f"acme/{value}")]
        assert "/" not in found[0].partition[len("acme/") :]
