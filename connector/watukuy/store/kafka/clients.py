"""The Kafka clients' settings and logs, in one place.

- :data:`OWNED_PROPERTIES`: every librdkafka property watukuy sets itself, with the runner
  setting to use instead (or why it is fixed). The config refuses them; the client configs
  below are the only place they are set.
- :func:`producer_config`, :func:`group_config`, :func:`tail_config`: what the store's clients
  are built with, from the user's ``kafka:`` properties; :func:`fresh_transactional_id`: the
  ``transactional.id`` of each new producer.
- :func:`check_properties`: the user's properties, checked by librdkafka itself at config load
  (building a client opens no connection), so a typo fails ``validate``, not the start.
- :func:`librdkafka_logger`: every client (producer, consumers, admin) logs through
  ``watukuy.librdkafka``, where the same message shows at most once per period.
- :func:`unreachable`: the one line that ends a start when the cluster does not answer.
"""

from __future__ import annotations

import difflib
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from watukuy import logs
from watukuy.core.durations import format_duration
from watukuy.core.errors import ConfigError, WatukuyError
from watukuy.store.kafka.topics import BrokerUnavailable

__all__ = [
    "LOGGER_NAME",
    "OWNED_PROPERTIES",
    "RepeatFilter",
    "admin_client",
    "check_properties",
    "group_config",
    "librdkafka_logger",
    "producer_config",
    "tail_config",
    "unreachable",
]

LOGGER_NAME = "watukuy.librdkafka"
REPEAT_PERIOD = 30.0  # seconds between two showings of the same librdkafka message

# librdkafka properties watukuy sets itself: for each, what to set instead, or why it is fixed.
# Exactly-once, restores and failover depend on these values; a user's value would be replaced
# without a word, so the config refuses them instead.
OWNED_PROPERTIES: Mapping[str, str] = {
    "transactional.id": "watukuy derives it from runner.group.id and runner.id; set those",
    "enable.idempotence": "fixed on: transactions need it",
    "transaction.timeout.ms": "set runner.session.timeout instead: a transaction may last "
    "as long as a session",
    "linger.ms": "fixed at 5ms: every commit flushes its records, so runner.commit.interval "
    "sets how much is batched",
    "queue.buffering.max.ms": "an alias of linger.ms, fixed at 5ms: every commit flushes its "
    "records, so runner.commit.interval sets how much is batched",
    "partitioner": "fixed to murmur2_random: a key's records must land on the partition "
    "watukuy computes for it (the Java client's murmur2)",
    "group.id": "set runner.group.id instead",
    "group.instance.id": "set runner.id and runner.static.membership instead",
    "group.protocol": "fixed to classic: watukuy rebalances cooperatively and sets the "
    "session timeout itself",
    "partition.assignment.strategy": "fixed to cooperative-sticky: a rebalance moves only the "
    "partitions that must move",
    "session.timeout.ms": "set runner.session.timeout instead",
    "heartbeat.interval.ms": "derived from runner.session.timeout (a fifth of it); set that",
    "enable.auto.commit": "fixed off: offsets are committed inside transactions",
    "isolation.level": "fixed to read_committed: aborted transactions must stay unseen",
    "enable.partition.eof": "fixed on: restores and readers stop at the end of a partition",
    "auto.offset.reset": "fixed to earliest: a restore reads its partitions from the start",
    "fetch.wait.max.ms": "fixed at 50ms for restores and readers: a failover must not wait "
    "on the broker's fetch",
    "fetch.queue.backoff.ms": "fixed at 10ms for restores and readers: at librdkafka's "
    "default (1000ms) a restore reads a third as fast",
    "logger": f"watukuy sends librdkafka's logs to the Python logger '{LOGGER_NAME}'; set "
    "'debug' for more of them",
}

LINGER_MS = 5
TAIL_FETCH_WAIT_MS = 50
TAIL_FETCH_QUEUE_BACKOFF_MS = 10

# Properties that only one kind of client reads: given to the other, librdkafka warns.
_PRODUCER_ONLY = ("linger.ms", "batch.", "compression.", "acks", "transaction.", "message.timeout")
_CONSUMER_ONLY = ("session.timeout", "heartbeat.", "fetch.", "auto.offset", "max.poll.")
_MEMBER_ONLY = ("max.poll.",)  # checked against a session timeout only a member has

# Property names suggested for a typo. librdkafka offers no list of its properties to Python,
# so these are the ones users commonly pass (a unit test checks librdkafka knows each one).
COMMON_PROPERTIES = (
    "bootstrap.servers",
    "client.id",
    "client.rack",
    "debug",
    "log_level",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.config",
    "sasl.kerberos.service.name",
    "sasl.kerberos.principal",
    "sasl.kerberos.keytab",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    "socket.keepalive.enable",
    "socket.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "connections.max.idle.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "request.timeout.ms",
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "broker.address.family",
    "client.dns.lookup",
    "statistics.interval.ms",
    "message.max.bytes",
    "message.timeout.ms",
    "compression.type",
    "compression.codec",
    "batch.size",
    "batch.num.messages",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "acks",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    *OWNED_PROPERTIES,
)


# -- logs -------------------------------------------------------------------------------------


class RepeatFilter(logs.RepeatFilter):
    """Lets each distinct librdkafka message through at most once per ``period`` seconds; the
    next one shown after a quiet spell says how many were held back (:class:`watukuy.logs.
    RepeatFilter`).

    A message is the librdkafka text without the client's name, so six clients failing to
    connect make one line, not six.
    """

    _VOLATILE = re.compile(r"after \d+ms|\d+ identical error\(s\) suppressed")

    def __init__(self, period: float = REPEAT_PERIOD, clock: Callable[[], float] = time.monotonic):
        super().__init__(period, clock)

    def key(self, record: logging.LogRecord) -> Hashable:
        return (record.levelno, self._VOLATILE.sub("…", self._text(record)))

    @staticmethod
    def _text(record: logging.LogRecord) -> str:
        # confluent-kafka logs ("%s [%s] %s", facility, client name, message)
        args = record.args
        if record.msg == "%s [%s] %s" and isinstance(args, tuple) and len(args) == 3:
            return f"{args[0]} {args[2]}"
        return record.getMessage()


_setup_lock = threading.Lock()


def librdkafka_logger() -> logging.Logger:
    """The logger every Kafka client is given, with its :class:`RepeatFilter`."""
    logger = logging.getLogger(LOGGER_NAME)
    with _setup_lock:
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter())
    return logger


def admin_client(kafka: Mapping[str, Any]) -> AdminClient:
    """An admin client on ``kafka``, logging through :func:`librdkafka_logger`.

    Its logs are queued until it is polled: :func:`drain_logs` shows them (rate-limited).
    """
    return AdminClient(dict(kafka) | {"logger": librdkafka_logger()})


def drain_logs(client: AdminClient) -> None:
    """Pass what an admin client logged to the logger; it has no other reason to be polled."""
    client.poll(0)


# -- reaching the cluster ---------------------------------------------------------------------


def bootstrap_of(kafka: Mapping[str, Any]) -> str:
    """``bootstrap.servers`` as it may be shown: hidden when it came from a secret."""
    if "bootstrap.servers" in getattr(kafka, "secret_keys", ()):
        return "[redacted]"
    return str(kafka.get("bootstrap.servers", "")) or "(no bootstrap.servers)"


def unreachable(kafka: Mapping[str, Any], timeout: float) -> BrokerUnavailable:
    """The error that ends a start when the cluster gave no answer within ``timeout``."""
    return BrokerUnavailable(
        f"cannot reach Kafka at {bootstrap_of(kafka)} within {format_duration(timeout)}; "
        "check kafka.bootstrap.servers (runner.startup.timeout)"
    )


# What librdkafka answers when no broker could be talked to.
UNREACHABLE_CODES = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._WAIT_COORD,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)


def translated(
    exc: KafkaException, kafka: Mapping[str, Any], timeout: float, doing: str
) -> WatukuyError:
    """:func:`unreachable` when no broker answered, else what the cluster said to ``doing``."""
    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError) or error.code() in UNREACHABLE_CODES:
        return unreachable(kafka, timeout)
    return WatukuyError(f"Kafka at {bootstrap_of(kafka)} failed {doing}: {error.str()}")


def probe(kafka: Mapping[str, Any], timeout: float) -> None:
    """Ask the cluster for its metadata; :func:`unreachable` when it does not answer."""
    admin = admin_client(kafka)
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise translated(exc, kafka, timeout, "listing topics") from exc
    finally:
        drain_logs(admin)


# -- client configs ---------------------------------------------------------------------------


def _base(kafka: Mapping[str, Any], drop: Sequence[str]) -> dict[str, Any]:
    kept = {k: v for k, v in kafka.items() if not k.startswith(tuple(drop))}
    return kept | {"logger": librdkafka_logger()}


def fresh_transactional_id(prefix: str) -> str:
    """A ``transactional.id`` no producer had before: ``prefix`` and a random suffix.

    Why not one stable id per instance, the usual way: a producer id must never write again
    after a transaction of it that did not commit. Right after a broker restart Kafka (4.x)
    can complete a transaction without writing its markers to some partitions ("likely
    deleted already", its coordinator logs); the records left there stay open, and the next
    marker that producer id writes to that partition ends them with its own outcome. A stable
    id keeps its producer id across a new producer or a restart, so its next *commit* there
    published what had been aborted (94 events twice in a broker-outage fault run). A new id
    is a new producer id: the partition hangs instead, which the runner reports and an operator
    aborts. The cost: an instance restarted after a crash no longer aborts what its previous
    incarnation left open, so those partitions wait for the transaction timeout, as they do
    when another instance takes them over.
    """
    return f"{prefix}.{secrets.token_hex(6)}"


def producer_config(
    kafka: Mapping[str, Any], *, transactional_id: str, transaction_timeout: float
) -> dict[str, Any]:
    """The transactional producer."""
    return _base(kafka, _CONSUMER_ONLY) | {
        "transactional.id": transactional_id,
        "transaction.timeout.ms": int(transaction_timeout * 1000),
        "partitioner": "murmur2_random",
        "linger.ms": LINGER_MS,
    }


def idempotent_config(kafka: Mapping[str, Any]) -> dict[str, Any]:
    """A producer without transactions (reports, schemas): the transactional producer's
    settings, writes idempotent."""
    config = producer_config(kafka, transactional_id="-", transaction_timeout=60.0)
    del config["transactional.id"], config["transaction.timeout.ms"]
    return config | {"enable.idempotence": True}


def group_config(
    kafka: Mapping[str, Any], *, group: str, session_timeout: float, instance_id: str | None
) -> dict[str, Any]:
    """The consumer that holds the runner's leases in the group (never reads)."""
    session_ms = int(session_timeout * 1000)
    config = _base(kafka, _PRODUCER_ONLY) | {
        "group.id": group,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": max(100, session_ms // 5),
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    if instance_id is not None:
        config["group.instance.id"] = instance_id
    return config


def tail_config(kafka: Mapping[str, Any], *, group: str) -> dict[str, Any]:
    """The consumers that restore partitions and read commands (assigned, never join: what
    only a group member reads is left out)."""
    return _base(kafka, (*_PRODUCER_ONLY, *_MEMBER_ONLY)) | {
        "group.id": group,  # never joins, never commits
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        # A restore is on the failover path: do not let the broker sit on a fetch.
        "fetch.wait.max.ms": TAIL_FETCH_WAIT_MS,
        # A partition whose fetched records wait in the client's queue past queued.min.messages
        # is not fetched again for this long (librdkafka's default: 1000 ms). A restore reads
        # 24 partitions as fast as it can, and every one of them sat out whole seconds: 125k
        # records/s with the default, 449k with 10 ms (the restore bench, 2,000,000 entries).
        "fetch.queue.backoff.ms": TAIL_FETCH_QUEUE_BACKOFF_MS,
    }


# -- checking the user's properties -----------------------------------------------------------


def owned_reason(key: str) -> str | None:
    """Why ``key`` cannot be set (``None``: it can)."""
    return OWNED_PROPERTIES.get(key.strip().lower())


_NO_SUCH = re.compile(r'No such configuration property: "(?P<key>[^"]*)"')
_INVALID = re.compile(r'Invalid value (?:"[^"]*" )?for configuration property "(?P<key>[^"]*)"')
_FAILED = re.compile(r"^Failed to create (?:producer|consumer): ")
_QUIET = logging.getLogger("watukuy.config.librdkafka")  # the checks' own clients: no output
_QUIET.propagate = False
_QUIET.addHandler(logging.NullHandler())


def check_properties(
    kafka: Mapping[str, Any], *, session_timeout: float, shown: Callable[[str], str]
) -> None:
    """Have librdkafka check the user's properties as the store's clients will get them.

    ``bootstrap.servers`` is left out, so the clients built here open no connection. A
    producer and both kinds of consumer are built: each checks what only it reads, and the
    properties against watukuy's own. ``shown(key)`` is how the value of ``key`` may appear
    in a message (``[redacted]`` for secrets).
    """
    for key in kafka:
        reason = owned_reason(key)
        if reason is not None:
            raise ConfigError(f"is managed by watukuy and cannot be set ({reason})", _path(key))
    given = {k: v for k, v in kafka.items() if k != "bootstrap.servers"}
    builds: list[tuple[Client, Callable[[Mapping[str, Any]], dict[str, Any]]]] = [
        (
            Producer,
            lambda props: producer_config(
                props, transactional_id="watukuy.check", transaction_timeout=session_timeout
            ),
        ),
        (
            Consumer,
            lambda props: group_config(
                props, group="watukuy.check", session_timeout=session_timeout, instance_id="c"
            ),
        ),
        (Consumer, lambda props: tail_config(props, group="watukuy.check.tail")),
    ]
    for client, configure in builds:
        refusal = _refusal(client, configure(given))
        if refusal is None:
            continue
        # librdkafka names a property by its canonical name (acks: request.required.acks), or
        # not at all: the one to point at is named in the refusal, or refused the same way alone.
        mentioned = (k for k in sorted(given, key=len, reverse=True) if _mentions(refusal, k))
        alone = (k for k in given if _refusal(client, configure({k: given[k]})) == refusal)
        raise _translated(refusal, next(mentioned, None) or next(alone, None), shown)


Client = Callable[[dict[str, Any]], Producer | Consumer]


def _refusal(client: Client, config: dict[str, Any]) -> str | None:
    """What librdkafka (or confluent-kafka) says against ``config``; ``None``: accepted."""
    try:
        built = client(config | {"logger": _QUIET})
    except KafkaException as exc:
        return str(exc.args[0].str())
    except (TypeError, ValueError) as exc:  # confluent-kafka's own checks (callbacks)
        return str(exc)
    if isinstance(built, Consumer):
        built.close()
    return None


def _mentions(text: str, key: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", text) is not None


def _translated(refusal: str, key: str | None, shown: Callable[[str], str]) -> ConfigError:
    no_such = _NO_SUCH.search(refusal)
    if no_such is not None:
        typo = key or no_such["key"]
        close = difflib.get_close_matches(typo, COMMON_PROPERTIES, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return ConfigError(f"is not a librdkafka property{hint}", _path(typo))
    if _INVALID.search(refusal) is not None and key is not None:
        return ConfigError(f"librdkafka refuses the value {shown(key)}", _path(key))
    detail = _FAILED.sub("", refusal).strip()
    notes = [
        f" (watukuy sets {k}; {why})" for k, why in OWNED_PROPERTIES.items() if _mentions(detail, k)
    ]
    where = _path(key) if key is not None else "kafka"
    return ConfigError(f"librdkafka refuses it: {detail}{''.join(notes[:1])}", where)


def _path(key: str) -> str:
    return f"kafka.{key}"


def refresh_metadata(client: Consumer, topic: str, timeout: float = 5.0) -> None:
    """Ask the cluster for ``topic``'s metadata, which replaces what ``client`` cached.

    A client that never fetches keeps its metadata until librdkafka's periodic refresh
    (minutes): after a broker restart it may go on answering "unknown partition" from it.
    """
    try:
        client.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        logging.getLogger("watukuy.kafka").debug("refreshing the metadata of %s: %s", topic, exc)
