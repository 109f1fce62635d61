"""Performing one page request: the only place a poll awaits the vendor.

Whatever ``fetch`` does — return a page, raise, hang, return garbage — comes back as a
``Page`` or a ``Failure`` for the core to decide on. Cancellation is never swallowed.

A ``Failure``'s error becomes ``last_error`` (the state topic, ``inspect()``) and log lines,
so it is made safe here, once per failure: the partition's ``data`` values and rendered URLs
are taken out, the type name and status stay (:func:`watukuy.core.redaction.failure_text`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from watukuy.core.errors import ShowsConfigOnly
from watukuy.core.observe import OutcomeKind, outcome_kind
from watukuy.core.poll import Failure, Page, PollPlan
from watukuy.core.poller import FetchResult, Partition, Poller
from watukuy.core.redaction import failure_text
from watukuy.core.state import Validators
from watukuy.engine.credentials import Vault
from watukuy.http import HttpClient, KeyHttp, NotModified, Throttled

GIVE_WAY: ContextVar[Callable[[], None]] = ContextVar("give_way")
"""Ends the ``fetch`` under way in this task early (its timeout, made to fire now): what a
request waiting for a budget's token calls when an operation waits for the key
(:meth:`KeyLock.giving_way`). A context variable: the wait is inside the poller's own
``fetch``, between :func:`execute` and the budget's gate."""


@dataclass(frozen=True, slots=True)
class CursorView:
    value: Any
    lane: str


@dataclass(frozen=True, slots=True)
class FetchContext:
    """What ``fetch(ctx)`` receives."""

    poller: str
    cursor: CursorView
    partition: Partition
    http: KeyHttp
    signal: asyncio.Event  # set when the engine is stopping: long fetches may end early
    credentials: Vault | None = None  # the tenants' grants (oauth2 grant: refresh_token)


async def execute(
    poller: Poller,
    partition: Partition,
    step: PollPlan,
    *,
    http: HttpClient,
    validators: Mapping[str, Validators],
    acquire: Callable[[], Awaitable[None]] | None,
    now: Callable[[], float],
    signal: asyncio.Event,
    on_response: Callable[[str, int | None, float], None] | None = None,
    credentials: Vault | None = None,
) -> Page | Failure:
    key_http = http.for_key(
        validators=validators, acquire=acquire, now=now, timeout=poller.fetch_timeout,
        on_response=on_response,
    )  # fmt: skip
    cursor = CursorView(value=step.fetch_value, lane=step.lane.value)
    ctx = FetchContext(poller.name, cursor, partition, key_http, signal, credentials)
    gave_way: list[bool] = []
    try:
        async with asyncio.timeout(poller.fetch_timeout) as bound:
            key_http.deadline = bound.when()
            # Only a poller with budgets waits for tokens: no context to set on other polls.
            with _NOTHING if acquire is None else _giving_way(bound, gave_way):
                returned = poller.fetch(ctx)
                if inspect.isawaitable(returned):
                    returned = await returned
        result = as_fetch_result(returned)
    except NotModified:
        return Page(
            result=FetchResult(items=[]),
            not_modified=True,
            validators=key_http.validators_changed,
            throttle_until=key_http.throttle_until,
        )
    except Throttled as exc:
        return Failure(
            error=failure_text(exc, partition.data, trusted=True),
            throttle_until=exc.until,
            kind=OutcomeKind.RATE_LIMITED,
        )
    except TimeoutError:
        return _timed_out(poller, key_http, now(), bool(gave_way))
    except Exception as exc:  # any failure of user code or the vendor is the core's to judge
        trusted = isinstance(exc, ShowsConfigOnly)
        return Failure(
            error=failure_text(exc, partition.data, trusted=trusted), kind=outcome_kind(exc)
        )
    return Page(
        result=result,
        validators=key_http.validators_changed,
        throttle_until=key_http.throttle_until,
    )


_NOTHING = nullcontext()


@contextmanager
def _giving_way(bound: asyncio.Timeout, gave_way: list[bool]) -> Iterator[None]:
    """Within it, :data:`GIVE_WAY` ends the fetch (its timeout fires now) and notes it in
    ``gave_way``; no fetch of this task's after it can be ended by it."""

    def give_way() -> None:
        if not gave_way and not bound.expired():
            gave_way.append(True)
            bound.reschedule(asyncio.get_running_loop().time())

    given = GIVE_WAY.set(give_way)
    try:
        yield
    finally:
        GIVE_WAY.reset(given)


def _timed_out(poller: Poller, key_http: KeyHttp, now: float, gave_way: bool) -> Failure:
    """Paced by this runner, not failed by the vendor, when the fetch ran out of time waiting
    for a budget's token or was ended for an operation on the key (which it did while
    waiting for one): no count against the key's circuit (five such timeouts opened it) and
    no backoff; the key is due again at once and waits for its token anew."""
    if gave_way:
        error = "fetch ended early for an operation on the key, waiting for a budget's token"
    elif key_http.cut_off_waiting_for_budget:
        error = f"fetch timed out after {poller.fetch_timeout:g}s waiting for a budget's token"
    else:
        said = f"fetch timed out after {poller.fetch_timeout:g}s"
        return Failure(error=said, kind=OutcomeKind.TIMEOUT)
    return Failure(error=error, throttle_until=now, kind=OutcomeKind.RATE_LIMITED)


def as_fetch_result(returned: object) -> FetchResult:
    """``FetchResult`` or ``{"items": [...], "cursor": ..., "has_more": ...}``."""
    if isinstance(returned, FetchResult):
        result = returned
    elif isinstance(returned, Mapping):
        unknown = sorted(set(returned) - {"items", "cursor", "has_more"})
        if unknown:
            raise TypeError(f"fetch returned an unknown key {unknown[0]!r}")
        result = FetchResult(
            items=returned.get("items"),  # type: ignore[arg-type]
            cursor=returned.get("cursor"),
            has_more=returned.get("has_more"),
        )
    else:
        raise TypeError(
            f"fetch must return FetchResult or {{'items', 'cursor'}}, got {type(returned).__name__}"
        )
    if not isinstance(result.items, list):
        raise TypeError(f"fetch returned items of type {type(result.items).__name__}, not a list")
    return result
