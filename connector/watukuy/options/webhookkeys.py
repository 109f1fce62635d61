"""The keys of ``webhook``, as data (see :mod:`watukuy.options.declarative`); parsed by
:func:`watukuy.declarative.webhooks.parse_webhook` (CONTRACT.md, "Webhooks wake tenants")."""

from __future__ import annotations

from watukuy.options.keydoc import KeyDoc

__all__ = ["MAPPING_OR_NONE", "webhook_keys"]

MAPPING_OR_NONE = "mapping or none"
"""The kind of ``webhook.verify``: a mapping of alternatives, or ``none`` written out."""

_SECRET_FROM = (
    '`"{partition.data.NAME}"`: each tenant\'s own secret, from its partition data (the '
    "tenant is found first, from the unverified request). Not with `secret`."
)


def webhook_keys(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "A vendor's webhooks wake tenants: a `POST` to `path` on `rest.listen` whose "
            "signature holds wakes the keys it names (polled at once, the poll staying the "
            "truth); 202 once the wake is durable in Kafka, 503 when Kafka cannot take it, "
            "401 for a bad or missing signature (nothing woken), 202 and counted for a tenant "
            "or key the runner does not know. The body is never published, stored or logged. "
            "On a connector entry or a poller on its own, not in a stream or `defaults`.",
        ),
        KeyDoc(
            f"{prefix}.path",
            "string",
            None,
            "The route, e.g. `/webhooks/tracker`; one connector's only, and none of REST's own "
            "(`/`, `/connectors...`, `/admin...`, `/health`, `/metrics`, `/openapi.json`). "
            "Exempt from `rest.auth`: the signature is its authentication.",
            required=True,
        ),
        *_verify(f"{prefix}.verify"),
        KeyDoc(
            f"{prefix}.tenant",
            "mapping",
            None,
            "Where a webhook names its tenant (the partition key): exactly one of the keys "
            "below. Required with `partitions`; without them, the one partition `''` is woken.",
            one_of=True,
        ),
        KeyDoc(f"{prefix}.tenant.header", "string", None, "A request header, e.g. `X-Tenant`."),
        KeyDoc(f"{prefix}.tenant.path", "path", None, "A path in the JSON body: `account.id`."),
        KeyDoc(
            f"{prefix}.streams",
            "list",
            None,
            "Which stream a payload wakes, on a connector with `streams`: rules "
            "`{when: {path, matches}, stream, key}` read in order, the first that matches "
            "deciding (none matching: nothing woken, counted). `when` (optional: without it "
            "the rule matches every payload) is a regex fully matching the string at `path` "
            "in the body; `stream` names a stream of the connector; `key`, required for a "
            "child or fan-out stream and only there, is text with `{body.PATH}` placeholders "
            "(`{body.issue.project_id}`): the partition woken is `<tenant>/<key>`, and a value "
            "missing or unfit for a key (not text or an integer, empty, holding `/`) wakes "
            "nothing. Without `streams`: every stream whose partitions are the tenants (or "
            "the poller itself), for the tenant.",
        ),
    ]


def _verify(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            MAPPING_OR_NONE,
            None,
            "How the signature is checked: exactly one of the keys below, or `none` written "
            "out to accept unsigned webhooks.",
            required=True,
            one_of=True,
        ),
        *_hmac(f"{prefix}.hmac"),
        *_stripe(f"{prefix}.stripe"),
        KeyDoc(
            f"{prefix}.secret_from",
            "template",
            None,
            "Beside `hmac` or `stripe` (as CONTRACT.md writes it): the tenant's own secret, "
            "`{partition.data.NAME}`, for a kind that names no `secret` of its own.",
            beside=True,
        ),
    ]


def _hmac(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "HMAC-SHA256 of the raw body in a header: GitHub's `X-Hub-Signature-256: "
            "sha256=<hex>` (`prefix: sha256=`), Shopify's base64.",
        ),
        KeyDoc(
            f"{prefix}.secret", "string", None, "The signing secret (`${env:...}`).", secret=True
        ),
        KeyDoc(f"{prefix}.secret_from", "template", None, _SECRET_FROM),
        KeyDoc(
            f"{prefix}.header",
            "string",
            None,
            "The header holding the signature, e.g. `X-Hub-Signature-256`.",
            required=True,
        ),
        KeyDoc(f"{prefix}.encoding", "hex | base64", "hex", "How the digest is written."),
        KeyDoc(f"{prefix}.prefix", "string", "", "Text before the digest, e.g. `sha256=`."),
    ]


def _stripe(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "Stripe's scheme: `t=<unix seconds>,v1=<hex>` (several `v1` while a secret rolls; "
            "any may match), the hex being HMAC-SHA256 of `<t>.<raw body>`.",
        ),
        KeyDoc(
            f"{prefix}.secret",
            "string",
            None,
            "The endpoint's signing secret (`whsec_...`, as Stripe shows it).",
            secret=True,
        ),
        KeyDoc(f"{prefix}.secret_from", "template", None, _SECRET_FROM),
        KeyDoc(f"{prefix}.header", "string", "Stripe-Signature", "The signature's header."),
        KeyDoc(
            f"{prefix}.tolerance",
            "duration",
            "5m",
            "How far `t` may be from now, either way (replays older than that are refused).",
        ),
    ]
