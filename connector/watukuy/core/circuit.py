"""Circuit breaker of one key (``poller/partition``).

A tenant whose API keeps failing must not be hammered, and must not hold up other tenants.
After ``failure_threshold`` consecutive failures the circuit *opens*: no request for
``cooldown`` seconds. Then exactly one *probe* goes out (*half-open*): success closes the
circuit, failure opens it again with a longer cooldown (``* multiplier``, capped at
``max_cooldown``), so a long outage costs one request per ``max_cooldown``.

The lifecycle is the transition table :data:`TRANSITIONS`; a move it does not list raises
:class:`~watukuy.core.errors.IllegalTransition` (e.g. reporting a result while open: no
request should have gone out). Usage, per poll::

    if circuit.allows(now):
        circuit = circuit.attempt(now)      # takes the single probe when the cooldown is over
        ... poll ...
        circuit = circuit.on_success(now)   # or circuit.on_failure(spec, now)

:class:`Circuit` is frozen: every method returns the next state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

from watukuy.core.errors import IllegalTransition

__all__ = [
    "TRANSITIONS",
    "Circuit",
    "CircuitEvent",
    "CircuitSpec",
    "CircuitState",
    "IllegalTransition",
]


class CircuitState(Enum):
    """The values are public: ``PollerInspect.circuit`` shows them."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class CircuitEvent(Enum):
    ATTEMPT = "attempt"
    """A request starts (when open: the cooldown is over and this is the probe)."""
    SUCCESS = "success"
    FAILURE = "failure"
    """A failure that does not open the circuit (closed, below the threshold)."""
    TRIP = "trip"
    """A failure that opens the circuit: the one reaching the threshold, or a failed probe."""
    CANCEL = "cancel"
    """A request ended with no verdict (cancelled, lease lost): a probe may go out again."""


_S = CircuitState
_E = CircuitEvent

TRANSITIONS: dict[tuple[CircuitState, CircuitEvent], CircuitState] = {
    (_S.CLOSED, _E.ATTEMPT): _S.CLOSED,
    (_S.CLOSED, _E.SUCCESS): _S.CLOSED,
    (_S.CLOSED, _E.FAILURE): _S.CLOSED,
    (_S.CLOSED, _E.TRIP): _S.OPEN,
    (_S.CLOSED, _E.CANCEL): _S.CLOSED,
    (_S.OPEN, _E.ATTEMPT): _S.HALF_OPEN,
    (_S.HALF_OPEN, _E.ATTEMPT): _S.HALF_OPEN,
    (_S.HALF_OPEN, _E.SUCCESS): _S.CLOSED,
    (_S.HALF_OPEN, _E.TRIP): _S.OPEN,
    (_S.HALF_OPEN, _E.CANCEL): _S.HALF_OPEN,
}
"""Legal moves. Guards (cooldown elapsed, probe in flight) are checked by :class:`Circuit`."""


@dataclass(frozen=True, slots=True)
class CircuitSpec:
    failure_threshold: int = 5
    cooldown: float = 30.0
    max_cooldown: float = 600.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, got {self.failure_threshold!r}")
        if not (math.isfinite(self.cooldown) and self.cooldown > 0):
            raise ValueError(
                f"cooldown must be a positive number of seconds, got {self.cooldown!r}"
            )
        if not (math.isfinite(self.max_cooldown) and self.max_cooldown >= self.cooldown):
            raise ValueError(
                f"max_cooldown ({self.max_cooldown!r}) must be >= cooldown ({self.cooldown!r})"
            )
        if not (math.isfinite(self.multiplier) and self.multiplier >= 1):
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier!r}")


@dataclass(frozen=True, slots=True)
class Circuit:
    """Breaker state of one key, persisted with the key's state.

    ``opened_at`` and ``cooldown`` describe the current open period (``None`` and ``0.0``
    while closed); ``probe_in_flight`` is only ever true when half-open.
    """

    state: CircuitState = CircuitState.CLOSED
    consecutive_failures: int = 0
    opened_at: float | None = None
    cooldown: float = 0.0
    probe_in_flight: bool = False

    def allows(self, now: float) -> bool:
        """Whether a request may start at ``now`` (a pure query: see :meth:`attempt`)."""
        if self.state is CircuitState.CLOSED:
            return True
        if self.state is CircuitState.OPEN:
            return now >= self._probe_at()
        return not self.probe_in_flight

    def ready_at(self, now: float) -> float | None:
        """Earliest time (``>= now``) a request may start; ``None`` while a probe is out."""
        if self.state is CircuitState.OPEN:
            return max(now, self._probe_at())
        if self.state is CircuitState.HALF_OPEN and self.probe_in_flight:
            return None
        return now

    def attempt(self, now: float) -> Circuit:
        """A request starts at ``now``. Open with the cooldown over: it becomes the one probe."""
        if self.state is CircuitState.CLOSED:
            return self  # closed stays closed (ATTEMPT keeps it) and never has a probe out
        if not self.allows(now):
            raise IllegalTransition(
                f"circuit {self.state.value}: no request allowed at {now!r}"
                + (" (a probe is in flight)" if self.probe_in_flight else "")
            )
        state = _move(self.state, CircuitEvent.ATTEMPT)
        return replace(self, state=state, probe_in_flight=state is CircuitState.HALF_OPEN)

    def on_success(self, now: float) -> Circuit:
        """The request succeeded: closed, failures and cooldown forgotten."""
        if self is _CLOSED or self == _CLOSED:
            # The usual poll: nothing to forget. The shared closed circuit is kept from here
            # on, so the next poll's test is by identity (the dataclass __eq__ builds tuples).
            return _CLOSED
        self._require_verdict_allowed(CircuitEvent.SUCCESS)
        return Circuit(state=_move(self.state, CircuitEvent.SUCCESS))

    def on_failure(self, spec: CircuitSpec, now: float) -> Circuit:
        """The request failed: count it; open at the threshold, or again after a failed probe."""
        failures = self.consecutive_failures + 1
        if self.state is CircuitState.HALF_OPEN:
            self._require_verdict_allowed(CircuitEvent.TRIP)
            cooldown = min(spec.max_cooldown, self.cooldown * spec.multiplier)
            return self._open(failures, now, max(cooldown, spec.cooldown))
        if self.state is CircuitState.CLOSED and failures >= spec.failure_threshold:
            return self._open(failures, now, spec.cooldown)
        state = _move(self.state, CircuitEvent.FAILURE)
        return replace(self, state=state, consecutive_failures=failures)

    def on_cancel(self) -> Circuit:
        """The request ended without a verdict: a half-open circuit may send its probe again.

        Also the way to resume a circuit restored as half-open with a probe that died with
        the previous owner.
        """
        state = _move(self.state, CircuitEvent.CANCEL)
        return replace(self, state=state, probe_in_flight=False)

    def _open(self, failures: int, now: float, cooldown: float) -> Circuit:
        state = _move(self.state, CircuitEvent.TRIP)
        return Circuit(state=state, consecutive_failures=failures, opened_at=now, cooldown=cooldown)

    def _probe_at(self) -> float:
        return (self.opened_at if self.opened_at is not None else 0.0) + self.cooldown

    def _require_verdict_allowed(self, event: CircuitEvent) -> None:
        if self.state is CircuitState.HALF_OPEN and not self.probe_in_flight:
            raise IllegalTransition(
                f"circuit half-open: {event.value} reported but no probe is in flight"
            )


_CLOSED = Circuit()


def _move(state: CircuitState, event: CircuitEvent) -> CircuitState:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(f"circuit {state.value}: {event.value} is not allowed") from None
