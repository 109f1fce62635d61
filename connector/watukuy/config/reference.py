"""The config reference: every key of the runner config, described once.

The parsers check keys against these tables (a test holds them equal), and the config
reference (docs/configuration.md) is generated from them, so the documentation cannot drift
from what ``validate`` accepts:

    python -m watukuy.config.reference            # print the reference as Markdown
    python -m watukuy.config.reference --write docs/configuration.md   # refresh between markers
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from watukuy.declarative.reference import reference_markdown as declarative
from watukuy.options.generated import GeneratedSection
from watukuy.options.keydoc import KeyDoc, markdown_table

RUNNER_KEYS: tuple[KeyDoc, ...] = (
    KeyDoc("kafka.bootstrap.servers", "string", None, "The brokers, `host:port[,...]`.", True),
    KeyDoc(
        "kafka.*",
        "librdkafka property",
        None,
        "Passed to every Kafka client (`security.protocol`, `sasl.*`, `ssl.*`, `client.id`...). "
        "Checked against librdkafka at load; keys watukuy sets itself are refused with the "
        "setting to use instead.",
    ),
    KeyDoc("topics.prefix", "topic name", "watukuy", "Prefix of every topic of this group."),
    KeyDoc("topics.partitions", "int", 32, "Partitions of the internal and events topics."),
    KeyDoc(
        "topics.replication.factor",
        "int",
        "3, or the broker count if fewer",
        "Replication factor of the topics created (from 3 up, with `min.insync.replicas` 2). "
        "On a cluster of 3 or more brokers, an internal topic with 1 replica stops the start "
        "unless 1 is written here.",
    ),
    KeyDoc(
        "runner.id",
        "string",
        None,
        "Stable id of this instance: its static group membership and the prefix of its "
        "transactional ids. "
        "Default: the hostname.",
    ),
    KeyDoc(
        "runner.group.id",
        "string",
        "<prefix>.runners",
        "Consumer group the instances share the keys through.",
    ),
    KeyDoc(
        "runner.commit.interval",
        "duration",
        "100ms",
        "How long one transaction gathers polls before it commits.",
    ),
    KeyDoc(
        "runner.max.concurrency",
        "int",
        256,
        "Polls fetching at once on this instance. A poll whose last page only waits for its "
        "commit has given its turn to another key (those pages count against "
        "`runner.max.pages.in.flight`), and so has one waiting for a budget's token until "
        "the token is its own: a tenant whose bucket is empty does not hold the others up.",
    ),
    KeyDoc(
        "runner.max.pages.in.flight.per.key",
        "int",
        16,
        "Pages of one tenant fetched while earlier ones wait for their commit (1: each page "
        "commits before the next is fetched).",
    ),
    KeyDoc(
        "runner.max.pages.in.flight",
        "int",
        1024,
        "Pages waiting for their commit on this instance, all tenants together.",
    ),
    KeyDoc(
        "runner.session.timeout",
        "duration",
        "10s",
        "How soon a departed instance's keys move (1s..300s); transactions time out after it.",
    ),
    KeyDoc(
        "runner.static.membership",
        "bool",
        True,
        "Keep this instance's keys across a quick restart (`group.instance.id` = runner.id).",
    ),
    KeyDoc(
        "runner.startup.timeout",
        "duration",
        "15s",
        "How long a start waits for the brokers before it gives up with one line.",
    ),
    KeyDoc(
        "runner.state.dir",
        "path | none",
        None,
        "Where this instance keeps its local state store (`<dir>/<topics.prefix>/<runner.id>`): "
        "a copy on disk of its keys' committed state, so a restart reads only what the topics "
        "gained since. Unset: state is held in memory and restored from the topics at start.",
    ),
    KeyDoc(
        "runner.standby.replicas",
        "int",
        1,
        "With runner.state.dir: how many other runners' partitions this one keeps warm on "
        "disk (the next ones by runner.id), so taking one over replays only its newest "
        "records. 0: none. Takes effect once the group has two runners or more.",
    ),
    KeyDoc(
        "runner.snapshot.cache.entries",
        "int",
        1_000_000,
        "Snapshot entries (one per item a key has seen) kept in memory for the keys polled "
        "most recently (about 300 bytes each); the others are loaded when a page needs them. "
        "With runner.state.dir they are read from disk, so memory follows the working set.",
    ),
    KeyDoc(
        "rest.listen",
        "host:port",
        "127.0.0.1:8083",
        "Where the REST API listens (`[::1]:8083` for IPv6; port 0 picks a free one).",
    ),
    KeyDoc(
        "rest.auth",
        "mapping | none",
        None,
        "Who may call the REST API: `{tokens: [...]}` (`Authorization: Bearer`) and/or "
        "`{basic: {user: password}}`, values usually `${env:...}`; or `none`. Required when "
        "`rest.listen` is not a loopback address (write `none` to serve without credentials). "
        "`GET /health` is always open.",
    ),
    KeyDoc(
        "rest.tls",
        "mapping",
        None,
        "Serve HTTPS: `{cert: server.pem, key: server.key}`, PEM files relative to the config "
        "file, loaded (and checked to match) at start.",
    ),
    KeyDoc(
        "budgets.NAME.rate",
        "rate or template",
        None,
        "Requests per unit shared by every poller naming the budget: `10/s`, `600/m`. With "
        "`per: tenant`, a template over `{partition.data.NAME}` may give each tenant its own "
        "(`{partition.data.rate_limit}/m`, quoted in YAML; a single placeholder keeps its type, a "
        "number being per second); a tenant whose data gives no rate fails its keys with an "
        "error naming this field.",
        True,
    ),
    KeyDoc(
        "budgets.NAME.burst",
        "number",
        None,
        "Tokens the bucket holds. Default: the rate (each tenant's own, with `per: tenant`).",
    ),
    KeyDoc(
        "budgets.NAME.per",
        "connector | tenant",
        "connector",
        "`connector`: one bucket for every poller naming the budget. `tenant`: a bucket per "
        "tenant (the tenant of a child key `acme/P1` is `acme`), shared by the streams naming "
        "the budget; made when the tenant first polls, let go once idle and full again. "
        "Either way, runner instances split it by the share of its (each tenant's) keys "
        "they hold.",
    ),
    KeyDoc(
        "budgets.NAME.fairness",
        "round-robin | weighted",
        "round-robin",
        "Who is served next among waiting keys (`weighted` honours `budget_weight`).",
    ),
    KeyDoc(
        "schema.registry.url",
        "URL",
        None,
        "With it, events use the Confluent wire format under `<topic>-value`; without it, "
        "Avro single-object encoding and the `<prefix>.schemas` topic.",
    ),
    KeyDoc(
        "schema.registry.basic.auth.user.info",
        "user:password",
        None,
        "Registry credentials (always redacted).",
    ),
    KeyDoc(
        "log.format",
        "text | json",
        "text",
        "`text`: a readable line, the context appended as `key=value`; `json`: one object a "
        "line with `time`, `level`, `logger`, `message` and, where known, `poller`, "
        "`partition`, `lane`, `runner`, `generation`.",
    ),
    KeyDoc(
        "log.level",
        "debug | info | warning | error",
        "info",
        "Least severe level shown (`--debug` forces `debug` and adds tracebacks).",
    ),
    KeyDoc(
        "log.repeat.interval",
        "duration",
        "60s",
        "A failing tenant's same warning shows at most once per interval; the next one says "
        "how many were not shown.",
    ),
    KeyDoc(
        "metrics.partition_label",
        "bool",
        True,
        "Label the per-key series of `GET /metrics` with `partition`; `false` aggregates them "
        "per poller (many tenants: fewer series).",
    ),
    KeyDoc(
        "credentials.store",
        "kafka | mapping",
        "kafka",
        "Where rotated per-tenant OAuth2 grants are kept: `kafka` (the compacted "
        "`<prefix>.credentials` topic, AES-256-GCM ciphertext only), or `{http: {...}}` (the "
        "user's own endpoint; refresh claims still go to `<prefix>.credentials`).",
    ),
    KeyDoc(
        "credentials.store.http.url",
        "template",
        None,
        "A tenant's grant: GET answers it (404: none), the method below saves it. Names "
        "`{partition.key}` (the tenant) and may name `{connector}`, both URL-quoted.",
    ),
    KeyDoc(
        "credentials.store.http.method",
        "PUT | POST | PATCH",
        "PUT",
        "How a rotated grant is sent (its JSON as the body); any 2xx means it is kept.",
    ),
    KeyDoc(
        "credentials.store.http.auth.bearer",
        "string",
        None,
        "Sent as `Authorization: Bearer ...` with every request to the endpoint.",
        secret=True,
    ),
    KeyDoc(
        "credentials.store.http.headers",
        "mapping",
        None,
        "Headers sent with every request to the endpoint (their values are never shown).",
        secret=True,
    ),
    KeyDoc(
        "credentials.key",
        "32-byte key",
        None,
        "The AES-256 key of the stored grants, as base64 or 64 hex characters (`openssl rand "
        "-base64 32`); required with `store: kafka`. Never shown.",
        secret=True,
    ),
    KeyDoc(
        "credentials.keys",
        "list of keys",
        None,
        "Instead of `key`, to rotate it: `[new, old]` writes with the first and reads with any. "
        "A stored grant no key given can read stops the start, naming this setting.",
        secret=True,
    ),
    KeyDoc(
        "credentials.lost_after",
        "duration",
        "60s",
        "A refresh claimed with no grant saved after it for this long was lost to a crash: "
        "the tenant needs authorising again.",
    ),
    KeyDoc(
        "python_path",
        "list",
        None,
        "Directories (relative to the config file) put in front of `sys.path` to import "
        "Python pollers.",
    ),
    KeyDoc(
        "pollers",
        "list",
        None,
        "Declarative pollers (`- name: ...`, below) and Python ones (`- python: module:attr`).",
        True,
    ),
)


def keys_under(section: str, table: Iterable[KeyDoc] = RUNNER_KEYS) -> tuple[str, ...]:
    """The keys directly under ``section`` (``runner`` -> ``id``, ``group.id``, ...)."""
    prefix = f"{section}."
    return tuple(doc.path[len(prefix) :] for doc in table if doc.path.startswith(prefix))


def reference_markdown() -> str:
    """The whole reference: the runner config, then the keys of a declarative poller."""
    return "\n".join(
        [
            "#### Runner config",
            "",
            "Durations are written with a unit: `250ms`, `30s`, `5m`, `2h`, `30d` (a bare number",
            "is refused: Kafka Connect users read it as milliseconds). Any string value may be",
            "`${env:NAME}`, `${file:PATH}` or `${file:PATH:KEY}` (a `.properties` key): resolved",
            "at load, never printed, logged or written to Kafka.",
            "",
            markdown_table(RUNNER_KEYS).strip(),
            "",
            "#### Declarative pollers",
            "",
            declarative().strip(),
        ]
    )


SECTION = GeneratedSection("config-reference", "watukuy.config.reference", reference_markdown)
START, END, embed, main = SECTION.start, SECTION.end, SECTION.embed, SECTION.main


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
