"""A poller definition and its validation, done once when it is defined.

Everything a user can set enters here and is checked here, so a bad value fails with the name
of the field instead of surfacing later inside a poll.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from watukuy.core.circuit import CircuitSpec
from watukuy.core.durations import parse_duration
from watukuy.core.errors import ConfigError
from watukuy.core.filters import MISSING, ItemPath, compile_filter, parse_item_path
from watukuy.core.schedule import ScheduleSpec
from watukuy.core.transforms import Transform, compile_transform

NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
CURSOR_STRATEGIES = ("token", "timestamp", "none")

ParentPoll = Literal["schedule", "on_change"]
"""When a child stream's key is polled: on its own timer, or when its parent item changes."""
PARENT_POLLS: tuple[ParentPoll, ...] = ("schedule", "on_change")


def check_parent_poll(value: object, path: str) -> ParentPoll:
    """``value`` as a :data:`ParentPoll`; ``ConfigError`` at ``path`` for anything else."""
    for known in PARENT_POLLS:
        if value == known:
            return known
    raise ConfigError(f"must be one of {', '.join(PARENT_POLLS)}, got {value!r}", path)


@dataclass(frozen=True, slots=True)
class Partition:
    """One tenant of a poller. ``data`` is transient and never stored anywhere."""

    key: str
    data: Any = None
    parents: tuple[str, ...] = ()
    """A child stream's ancestors' item keys, nearest first: ``{parent.key}`` is
    ``parents[0]``, ``{parent.parent.key}`` ``parents[1]``; a fan-out stream's values, the
    last first (each the key's part after the tenant's); ``()`` for a tenant."""

    def __repr__(self) -> str:
        # data often holds credentials: keep it out of logs and tracebacks.
        return f"Partition(key={self.key!r})"


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One page returned by ``fetch``.

    ``has_more`` says whether the poll should call ``fetch`` again; when left ``None`` it is
    inferred from the cursor (see ``watukuy.core.cursor.page_has_more``).
    """

    items: list[Any]
    cursor: Any = None
    has_more: bool | None = None


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An item of a page that is not one: what a ``fetch`` returns in its place so that it is
    parked ``invalid`` with ``reason`` (naming config, never values), never dropped silently
    (a wrapped record without the object it wraps)."""

    item: Any
    reason: str


@dataclass(frozen=True, slots=True)
class CursorSpec:
    strategy: str = "token"
    initial: Any = None
    field: str | None = None  # timestamp strategy: the item field holding the watermark
    lookback: float = 0.0  # timestamp strategy: re-read this much before the watermark


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 30.0


@dataclass(frozen=True, slots=True)
class StreamOf:
    """What a poller is when it is one stream of a connector (CONTRACT.md, "Several streams"):
    the poller is named ``<connector>.<stream>``; REST, the CLI and metrics group the streams
    of one connector by it."""

    connector: str
    stream: str

    @property
    def poller(self) -> str:
        return f"{self.connector}.{self.stream}"


@dataclass(frozen=True, slots=True)
class ParentSpec:
    """What makes a poller a child stream: one partition per item of the ``poller`` it names.

    ``key`` reads the parent item's key (the child partition is ``<parent partition>/<key>``);
    ``where`` (optional) says which parent items have a child. Both read the parent's item.
    A deletion published without its item (found by a reconcile, or an item leaving the
    parent's filter) finds its child by the parent item's identity, so ``key`` should return
    the identity when the parent reconciles or filters.

    ``poll``: ``schedule`` (the default), each child key polled on its own timer like any key;
    ``on_change``, polled once when the parent item creates it and again each time that item
    is ``updated``, never on a timer (:mod:`watukuy.core.onchange`).
    """

    poller: str
    key: Callable[[Any], Any]
    where: Callable[[Any], bool] | None = None
    poll: ParentPoll = "schedule"

    @property
    def on_change(self) -> bool:
        return self.poll == "on_change"


@dataclass(frozen=True, slots=True, eq=False)
class Poller:
    """A validated poller definition: build it with :func:`define_poller`."""

    name: str
    fetch: Callable[..., Any]
    identity: Callable[[Any], Any]
    version: Callable[[Any], Any] | None
    fingerprint: Callable[[Any], str] | None
    partitions: Callable[[], Any] | None
    partitions_refresh: float
    cursor: CursorSpec
    schedule: ScheduleSpec
    budget: str | tuple[str, ...] | None
    """The budget it names, or several (a request waits for a token of each): see
    :attr:`budgets`."""
    budget_weight: float
    schema_version: int
    retain: float
    max_pages: int
    reconcile: float | None
    fetch_timeout: float
    circuit: CircuitSpec
    handler: HandlerSpec
    topic: str | None
    schema: Any
    extra: Mapping[str, Any] = field(default_factory=dict)
    validate: Callable[[Any], str | None] | None = None
    """Set by the engine from ``schema``: the reason an item does not conform, or None."""
    stream_of: StreamOf | None = None
    """Set for a stream of a connector with ``streams:``; ``None`` for a poller on its own."""
    transform: Transform | None = None
    """What is published of each item (``None``: the item as the vendor sent it)."""
    parent: ParentSpec | None = None
    """Set for a child stream: its keys are created by its parent's commits, not listed."""
    fanout: tuple[str, ...] = ()
    """Set for a fan-out stream: the names of the values that end its keys
    (``<tenant>/<v1>/<v2>``, the values its partitions carry as ``parents``, last first). A
    key whose value leaves its tenant's list is paused and, after ``retain``, deleted."""

    @property
    def budgets(self) -> tuple[str, ...]:
        """The names of the budgets its requests take a token of (none, one or several)."""
        if self.budget is None:
            return ()
        return (self.budget,) if isinstance(self.budget, str) else self.budget

    @property
    def partitioned(self) -> bool:
        return self.partitions is not None or self.parent is not None

    @property
    def expires_keys(self) -> bool:
        """Whether its keys paused by a listing (a parent item, a tenant, a fan-out value
        gone) are deleted after ``retain``: a child or fan-out stream's are."""
        return self.parent is not None or bool(self.fanout)

    @property
    def publishes(self) -> bool:
        """``False`` for a stream written ``publish: false``: polled (its snapshot kept, its
        children driven) but its events never reach Kafka."""
        return self.extra.get("publish") is not False


def define_poller(
    *,
    name: str,
    fetch: Callable[..., Any],
    identity: Callable[[Any], Any],
    version: Callable[[Any], Any] | None = None,
    fingerprint: Callable[[Any], str] | None = None,
    partitions: Callable[[], Any] | None = None,
    partitions_refresh: object = "5m",
    cursor: Mapping[str, Any] | None = None,
    schedule: Mapping[str, Any] | None = None,
    budget: str | Sequence[str] | None = None,
    budget_weight: float = 1,
    schema_version: int = 1,
    retain: object = "30d",
    max_pages: int = 100,
    reconcile: object = None,
    fetch_timeout: object = "60s",
    circuit: Mapping[str, Any] | None = None,
    handler: Mapping[str, Any] | None = None,
    topic: str | None = None,
    schema: Any = None,
    transform: Mapping[str, Any] | Transform | None = None,
    parent: ParentSpec | Mapping[str, Any] | None = None,
) -> Poller:
    """Define a poller; a ``ConfigError`` names the first bad field (see :func:`_transform`)."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ConfigError(f"must match [A-Za-z0-9._-]+, got {name!r}", "name")
    where = f"poller '{name}'"
    _require_callable(fetch, f"{where}.fetch")
    _require_callable(identity, f"{where}.identity")
    _optional_callables(where, version=version, fingerprint=fingerprint, partitions=partitions)
    return Poller(
        name=name,
        fetch=fetch,
        identity=identity,
        version=version,
        fingerprint=fingerprint,
        partitions=partitions,
        partitions_refresh=parse_duration(partitions_refresh, f"{where}.partitions_refresh"),
        cursor=_cursor_spec(cursor, f"{where}.cursor"),
        schedule=_schedule_spec(schedule, f"{where}.schedule"),
        budget=_budget_names(budget, f"{where}.budget"),
        budget_weight=_positive_number(budget_weight, f"{where}.budget_weight"),
        schema_version=_positive_int(schema_version, f"{where}.schema_version"),
        retain=parse_duration(retain, f"{where}.retain"),
        max_pages=_positive_int(max_pages, f"{where}.max_pages"),
        reconcile=None if reconcile is None else parse_duration(reconcile, f"{where}.reconcile"),
        fetch_timeout=parse_duration(fetch_timeout, f"{where}.fetch_timeout"),
        circuit=_circuit_spec(circuit, f"{where}.circuit"),
        handler=_handler_spec(handler, f"{where}.handler"),
        topic=_topic(topic, f"{where}.topic"),
        schema=schema,
        transform=_transform(transform, f"{where}.transform", schema),
        parent=_parent_spec(parent, name, where, partitions is not None),
    )


def _budget_names(given: object, path: str) -> str | tuple[str, ...] | None:
    """A budget name, or a list of distinct names (kept as a tuple)."""
    if given is None or (isinstance(given, str) and given):
        return given
    if isinstance(given, str) or not isinstance(given, Sequence) or not given:
        raise ConfigError(f"must be a budget name or a list of them, got {given!r}", path)
    for index, name in enumerate(given):
        if not isinstance(name, str) or not name:
            raise ConfigError(f"must be a budget name, got {name!r}", f"{path}[{index}]")
        if name in given[:index]:
            raise ConfigError(f"budget {name!r} is named twice", f"{path}[{index}]")
    return tuple(given)


def _transform(given: object, path: str, schema: Any) -> Transform | None:
    """``transform=`` takes the mapping of a declarative poller's ``transform:`` key (see
    :mod:`watukuy.core.transforms`), with HMAC keys themselves rather than references."""
    if given is None or isinstance(given, Transform):  # compiled: a declarative poller's
        return given
    return compile_transform(given, path, schema=schema if isinstance(schema, Mapping) else None)


def _parent_spec(given: object, name: str, where: str, listed: bool) -> ParentSpec | None:
    if given is None:
        return None
    if listed:  # a child's keys come from its parent's items: a listing would compete
        raise ConfigError("a child poller (with parent) takes no partitions", f"{where}.partitions")
    path = f"{where}.parent"
    if isinstance(given, ParentSpec):
        spec = given
    elif isinstance(given, Mapping):
        _known_keys(given, {"poller", "key", "where", "poll"}, path)
        key, keep = given.get("key"), given.get("where")
        # The declarative form: a path for key, a filter mapping for where (core.filters).
        if isinstance(key, str):
            key = _KeyAt(parse_item_path(key, f"{path}.key"))
        if isinstance(keep, Mapping):
            keep = compile_filter(keep, f"{path}.where")
        poll = given.get("poll", "schedule")
        spec = ParentSpec(given.get("poller"), key, keep, poll)  # type: ignore[arg-type]
    else:
        raise ConfigError(f"must be a ParentSpec or a mapping, got {type(given).__name__}", path)
    if not isinstance(spec.poller, str) or not NAME_PATTERN.match(spec.poller):
        raise ConfigError(f"must name a poller, got {spec.poller!r}", f"{path}.poller")
    if spec.poller == name:
        raise ConfigError("a poller cannot be its own parent", f"{path}.poller")
    _require_callable(spec.key, f"{path}.key")
    check_parent_poll(spec.poll, f"{path}.poll")
    if spec.where is not None:
        _require_callable(spec.where, f"{path}.where")
    return spec


@dataclass(frozen=True, slots=True)
class _KeyAt:
    """A parent item's key read at a path; ``ValueError`` naming the path when absent."""

    path: ItemPath

    def __call__(self, item: Any) -> Any:
        found = self.path.find(item)
        if found is MISSING or found is None:
            raise ValueError(f"no value at key path {self.path.text!r}")
        return found


def _optional_callables(where: str, **given: object) -> None:
    for label, fn in given.items():
        if fn is not None:
            _require_callable(fn, f"{where}.{label}")


def _require_callable(value: object, path: str) -> None:
    if not callable(value):
        raise ConfigError(f"must be callable, got {type(value).__name__}", path)


def _positive_number(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"must be a positive number, got {value!r}", path)
    if not math.isfinite(value):  # YAML's .inf; JSON's 1e999
        raise ConfigError(f"must be a finite number, got {value!r}", path)
    return float(value)


def _positive_int(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"must be a positive integer, got {value!r}", path)
    return value


def _known_keys(given: Mapping[str, Any], allowed: set[str], path: str) -> None:
    if not isinstance(given, Mapping):
        raise ConfigError(f"must be a mapping, got {type(given).__name__}", path)
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})", path)


def _cursor_spec(given: Mapping[str, Any] | None, path: str) -> CursorSpec:
    if given is None:
        return CursorSpec()
    _known_keys(given, {"strategy", "initial", "field", "lookback"}, path)
    strategy = given.get("strategy", "token")
    if strategy not in CURSOR_STRATEGIES:
        raise ConfigError(
            f"unknown cursor strategy {strategy!r} (known: {', '.join(CURSOR_STRATEGIES)})",
            f"{path}.strategy",
        )
    field_name = given.get("field")
    if strategy == "timestamp" and (not isinstance(field_name, str) or not field_name):
        raise ConfigError("the timestamp strategy needs the item field to read", f"{path}.field")
    lookback = given.get("lookback", 0)
    return CursorSpec(
        strategy=strategy,
        initial=given.get("initial"),
        field=field_name,
        lookback=parse_duration(lookback, f"{path}.lookback", allow_zero=True),
    )


def _schedule_spec(given: Mapping[str, Any] | None, path: str) -> ScheduleSpec:
    given = {"min": "30s", "max": "15m"} if given is None else given
    _known_keys(given, {"min", "max", "increase", "decrease_factor"}, path)
    low = parse_duration(given.get("min", "30s"), f"{path}.min")
    high = parse_duration(given.get("max", max(low, 900.0)), f"{path}.max")
    if low > high:
        raise ConfigError(f"min ({given.get('min')!r}) is greater than max", f"{path}.min")
    increase = given.get("increase")
    factor = given.get("decrease_factor", 0.5)
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor <= 1:
        raise ConfigError(f"must be in (0, 1], got {factor!r}", f"{path}.decrease_factor")
    return ScheduleSpec(
        min=low,
        max=high,
        increase=None if increase is None else parse_duration(increase, f"{path}.increase"),
        decrease_factor=float(factor),
    )


def _circuit_spec(given: Mapping[str, Any] | None, path: str) -> CircuitSpec:
    if given is None:
        return CircuitSpec()
    _known_keys(given, {"failure_threshold", "cooldown", "max_cooldown", "multiplier"}, path)
    cooldown = parse_duration(given.get("cooldown", 30), f"{path}.cooldown")
    max_cooldown = parse_duration(
        given.get("max_cooldown", max(600, cooldown)), f"{path}.max_cooldown"
    )
    if max_cooldown < cooldown:
        raise ConfigError("must not be less than cooldown", f"{path}.max_cooldown")
    multiplier = _positive_number(given.get("multiplier", 2), f"{path}.multiplier")
    if multiplier < 1:
        raise ConfigError(f"must be >= 1, got {multiplier!r}", f"{path}.multiplier")
    return CircuitSpec(
        failure_threshold=_positive_int(
            given.get("failure_threshold", 5), f"{path}.failure_threshold"
        ),
        cooldown=cooldown,
        max_cooldown=max_cooldown,
        multiplier=multiplier,
    )


def _handler_spec(given: Mapping[str, Any] | None, path: str) -> HandlerSpec:
    if given is None:
        return HandlerSpec()
    _known_keys(given, {"attempts", "backoff", "max_backoff"}, path)
    return HandlerSpec(
        attempts=_positive_int(given.get("attempts", 5), f"{path}.attempts"),
        backoff=parse_duration(given.get("backoff", 0.5), f"{path}.backoff"),
        max_backoff=parse_duration(given.get("max_backoff", 30), f"{path}.max_backoff"),
    )


def _topic(topic: str | None, path: str) -> str | None:
    if topic is not None and (not isinstance(topic, str) or not NAME_PATTERN.match(topic)):
        raise ConfigError(f"must be a Kafka topic name, got {topic!r}", path)
    return topic
