"""The observer seam: what the engine and the stores report, and the kind of each outcome.

The engine and the Kafka store call an :class:`Observer` at each point worth counting (a poll
decided, a page fetched, events committed, a transaction, a lease moved, a restore, a budget
wait, an item parked, a circuit moved). Prometheus metrics, the status feed and test probes
are observers; the I/O code holds one call per point and no metric of its own. In the spirit
of trio's instruments: every hook is a no-op here, an observer overrides the ones it counts.

Hooks run on the event loop, must not block, and must not raise: :class:`Fanout` hands what
one raises to its ``on_error`` (the engine logs it) and goes on with the next observer.

Outcomes keep their redacted text (``last_error``) and carry an :class:`OutcomeKind` next to
it, so a metric can count timeouts without parsing messages. :func:`outcome_kind` maps an
exception to its kind by the shape the HTTP and store errors share (``status``, ``until``,
``reason``, a ``TimeoutError`` cause): ``core`` imports neither ``http`` nor ``store``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from watukuy.core.errors import ConfigError, Fenced, NeedsAuthorization, Retriable

__all__ = [
    "NEEDS_AUTHORIZATION_PREFIX",
    "SCHEMA_ERROR_PREFIX",
    "Fanout",
    "Observer",
    "OutcomeKind",
    "fanout",
    "hooks",
    "outcome_kind",
    "parked_reason",
    "status_class",
]


class OutcomeKind(StrEnum):
    """What a poll (one page request) ended in. Values are metric label values."""

    OK = "ok"
    NOT_MODIFIED = "not_modified"  # 304: nothing changed since the validators we sent
    RATE_LIMITED = "rate_limited"  # 429, or 503 with Retry-After: pacing, not an outage
    TIMEOUT = "timeout"  # the request or the whole fetch ran out of time
    CONNECT = "connect"  # no usable answer: refused, reset, DNS, TLS
    CLIENT_ERROR = "http_4xx"
    SERVER_ERROR = "http_5xx"
    INVALID_BODY = "invalid_body"  # an answer whose body is not what it claims (bad JSON)
    SCHEMA_INVALID = "schema_invalid"  # an item that fails the poller's data schema
    INVALID_ITEM = "invalid_item"  # an item whose identity or version cannot be read
    FENCED = "fenced"  # another owner took the key over
    STORE = "store"  # the store refused for now (broker down, transaction failed)
    CONFIG = "config"  # the poller or its partition is misconfigured
    NEEDS_AUTHORIZATION = "needs_authorization"  # the tenant's grant was refused or lost
    ERROR = "error"  # anything else ``fetch`` raised


NEEDS_AUTHORIZATION_PREFIX = "NeedsAuthorization: "
"""How the ``last_error`` of a key whose tenant needs authorising again starts (the failure
text of :class:`watukuy.core.errors.NeedsAuthorization`): what its task state is read from."""

SCHEMA_ERROR_PREFIX = "SchemaError: "
"""How :func:`watukuy.core.changes.detect` starts the error of an item the schema refused."""


def outcome_kind(error: object) -> OutcomeKind:
    """The kind of a failed outcome: a ``Failure``/``Backoff``/``Trip`` (its ``kind``) or an
    exception.

    An exception is read by its shape, in this order: a ``kind`` attribute that is an
    ``OutcomeKind`` wins; ``Fenced`` and ``ConfigError`` by class; a ``TimeoutError`` (or one
    as the ``__cause__``, as the HTTP client chains it); a ``status`` (``until`` or 429: rate
    limited, 304, 5xx, 4xx); a ``reason`` (the client's "no usable answer": connect when
    retriable, an invalid body otherwise); another ``Retriable`` (the store); else error.
    """
    kind = getattr(error, "kind", None)
    if isinstance(kind, OutcomeKind):
        return kind
    if not isinstance(error, BaseException):
        return OutcomeKind.ERROR
    if isinstance(error, Fenced):
        return OutcomeKind.FENCED
    if isinstance(error, ConfigError):
        return OutcomeKind.CONFIG
    if isinstance(error, NeedsAuthorization):
        return OutcomeKind.NEEDS_AUTHORIZATION
    if isinstance(error, TimeoutError) or isinstance(error.__cause__, TimeoutError):
        return OutcomeKind.TIMEOUT
    status = getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if getattr(error, "until", None) is not None or status == 429:
            return OutcomeKind.RATE_LIMITED
        if status == 304:
            return OutcomeKind.NOT_MODIFIED
        if status >= 500:
            return OutcomeKind.SERVER_ERROR
        if status >= 400:
            return OutcomeKind.CLIENT_ERROR
    if isinstance(getattr(error, "reason", None), str):
        return OutcomeKind.CONNECT if isinstance(error, Retriable) else OutcomeKind.INVALID_BODY
    if isinstance(error, Retriable):
        return OutcomeKind.STORE
    return OutcomeKind.ERROR


def parked_reason(kind: str, error: str) -> OutcomeKind:
    """Why an item was parked: a schema refused it, its identity/version could not be read,
    or (``poison``) processing it kept failing."""
    if kind == "poison":
        return OutcomeKind.ERROR
    if error.startswith(SCHEMA_ERROR_PREFIX):
        return OutcomeKind.SCHEMA_INVALID
    return OutcomeKind.INVALID_ITEM


def status_class(status: int | None) -> str:
    """``2xx``..``5xx`` for a response status; ``none`` when no answer came (timeout, refused)."""
    if status is None or not 100 <= status <= 599:
        return "none"
    return f"{status // 100}xx"


@dataclass(frozen=True, slots=True)
class StateFigures:
    """Where a runner's state lives, read at each scrape: the snapshots the engine holds in
    memory (:mod:`watukuy.engine.snapshots`) and the local state store, if there is one."""

    snapshot_keys: int = 0
    snapshot_entries: int = 0
    snapshot_hits: int = 0
    snapshot_loads: int = 0
    snapshot_entry_reads: int = 0
    disk_bytes: int | None = None  # None: no local state store
    standby_partitions: int = 0
    standby_lag: float = 0.0  # records the standbys are behind at their last look (NaN: unknown)
    restored_from_disk: int = 0  # records restores took from the store instead of Kafka


class Observer:
    """What the engine and the stores report. Every hook is a no-op: override what you count.

    ``poller``/``partition`` name the key (the partition key, never its data); ``lane`` is
    ``live``, ``backfill`` or ``reconcile``; times are seconds.
    """

    # -- polls (engine) -----------------------------------------------------------------------

    def poll_decided(
        self, poller: str, partition: str, lane: str, kind: OutcomeKind, seconds: float
    ) -> None:
        """One page request was decided: ``kind`` is ``ok``/``not_modified`` or the failure's;
        ``seconds`` is how long ``fetch`` took."""

    def http_response(
        self, poller: str, partition: str, method: str, status: int | None, seconds: float
    ) -> None:
        """One HTTP round trip of ``ctx.http``; ``status`` ``None``: no answer came."""

    def page_fetched(
        self, poller: str, partition: str, lane: str, items: int, not_modified: bool
    ) -> None:
        """A page came back (before change detection): ``items`` items in it."""

    def events_committed(
        self, poller: str, partition: str, lane: str, counts: Mapping[str, int]
    ) -> None:
        """A page's events were committed: ``counts`` by type (created, updated, deleted)."""

    def item_parked(self, poller: str, partition: str, kind: str, reason: OutcomeKind) -> None:
        """An item or event was parked (committed): ``kind`` ``invalid`` or ``poison``."""

    def circuit_moved(self, poller: str, partition: str, old: str, new: str) -> None:
        """The key's circuit went from ``old`` to ``new`` (closed, open, half-open)."""

    def budget_waited(
        self, budget: str, poller: str, partition: str, lane: str, seconds: float, tokens: float
    ) -> None:
        """A request got its token after ``seconds``; ``tokens`` were left in the bucket."""

    # -- keys (engine) ------------------------------------------------------------------------

    def key_gained(self, poller: str, partition: str) -> None:
        """This instance holds the key now (restored, scheduled)."""

    def key_released(self, poller: str, partition: str, reason: str) -> None:
        """The key left this instance (``reason``: fenced, removed, stopped, ...): forget its
        series."""

    # -- the Kafka store ----------------------------------------------------------------------

    def transaction_done(
        self, committed: bool, seconds: float, records: int, kind: OutcomeKind | None
    ) -> None:
        """A Kafka transaction committed, or aborted (``kind`` says why)."""

    def leases_gained(self, kafka_partitions: tuple[int, ...]) -> None:
        """A rebalance assigned these Kafka partitions of ``<prefix>.state`` (restores follow)."""

    def leases_lost(self, kafka_partitions: tuple[int, ...], lost: bool) -> None:
        """A rebalance took these Kafka partitions away: revoked cleanly, or ``lost``."""

    def restore_done(self, kafka_partition: int, keys: int, records: int, seconds: float) -> None:
        """A Kafka partition was restored: ``records`` read for ``keys`` keys in ``seconds``."""

    def dlq_written(self, poller: str, partition: str, records: int) -> None:
        """``records`` parked items were copied to the poller's DLQ topic (committed)."""

    def state_caught_up(self, poller: str, partition: str, events: int) -> None:
        """A restore found ``events`` published events the key's stored state had lost, and
        rolled the state forward over them (see :mod:`watukuy.store.kafka.catchup_rule`)."""

    def transactions_hanging(self, topic: str, kafka_partitions: tuple[int, ...]) -> None:
        """The Kafka partitions of ``topic`` where a transaction hangs, as of now (none: an empty
        tuple); see :mod:`watukuy.store.kafka.hanging_rule`."""

    def partitions_unowned(self, kafka_partitions: tuple[int, ...]) -> None:
        """The Kafka partitions of ``<prefix>.state`` that no live runner has held for longer
        than a session timeout, as of this instance's last look (none: an empty tuple); see
        :mod:`watukuy.core.ownership`."""

    def webhook_received(self, connector: str, result: str) -> None:
        """A webhook was answered: ``result`` is ``accepted``, ``bad_signature``,
        ``unknown_tenant``, ``unknown_key``, ``bad_body``, ``too_large`` or ``unavailable``."""

    def wake_served(self, poller: str, partition: str, seconds: float) -> None:
        """The first commit of a key after a webhook woke it, ``seconds`` after the webhook's
        wake was accepted (on the instance that answered it)."""


ErrorSink = Callable[[Observer, str, Exception], None]


def _raise(observer: Observer, hook: str, error: Exception) -> None:
    raise error


def hooks(protocol: type[Observer]) -> tuple[str, ...]:
    """The hooks of ``protocol``: the public methods of :class:`Observer` and of every class
    between them that extends it, in declaration order (a fan-out's own are not hooks)."""
    names: dict[str, None] = {}
    for cls in reversed(protocol.__mro__):
        if issubclass(cls, Observer) and not issubclass(cls, Fanout):
            names.update((n, None) for n, v in vars(cls).items() if _is_hook(n, v))
    return tuple(names)


def _is_hook(name: str, value: object) -> bool:
    return not name.startswith("_") and callable(value)


def _forwarding(hook: str) -> Callable[..., None]:
    def forward(self: Fanout, *args: Any, **kwargs: Any) -> None:
        self._each(hook, *args, **kwargs)

    forward.__name__ = forward.__qualname__ = hook
    forward.__doc__ = f"Hand ``{hook}`` to every observer."
    return forward


class Fanout(Observer):
    """Several observers as one: each hook is called on each, in order. An observer that
    raises is reported to ``on_error`` (default: re-raised) and the others still hear it.

    Its hooks are not written out: each hook of the observer protocol forwards (see
    :func:`hooks`), so a hook added to :class:`Observer` reaches every observer as it is. A
    subclass that also extends a protocol (``class Mine(Fanout, MyObserver)``) forwards that
    protocol's hooks too.
    """

    def __init__(self, observers: Iterable[Observer], on_error: ErrorSink = _raise) -> None:
        self.observers = tuple(observers)
        self._on_error = on_error
        # Per hook, the observers that do something with it, each with its method: most hooks
        # are counted by one observer of several, and each poll calls five of them (asking
        # each observer by name made the fan-out 1% of an idle runner's CPU).
        self._listeners: dict[str, tuple[tuple[Observer, Callable[..., None]], ...]] = {
            hook: tuple(
                (observer, method)
                for observer in self.observers
                if not _does_nothing(method := getattr(observer, hook))
            )
            for hook in hooks(type(self))
        }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _forward_hooks(cls)

    def _each(self, hook: str, *args: object, **kwargs: object) -> None:
        for observer, method in self._listeners[hook]:
            try:
                method(*args, **kwargs)
            except Exception as exc:  # an observer's bug must not fail a poll or a commit
                self._on_error(observer, hook, exc)


def _does_nothing(method: object) -> bool:
    """Whether ``method`` is :class:`Observer`'s own hook, which does nothing."""
    function = getattr(method, "__func__", None)
    name = getattr(function, "__name__", "")
    return function is not None and vars(Observer).get(name) is function


def _forward_hooks(cls: type[Fanout]) -> None:
    for hook in hooks(cls):
        if hook not in vars(cls):
            setattr(cls, hook, _forwarding(hook))


_forward_hooks(Fanout)


def fanout(observers: Observer | Iterable[Observer] | None, on_error: ErrorSink = _raise) -> Fanout:
    """``observers=`` as the engine and the store take it: none, one, or several."""
    if observers is None:
        return Fanout((), on_error)
    if isinstance(observers, Observer):
        return Fanout((observers,), on_error)
    return Fanout(observers, on_error)
