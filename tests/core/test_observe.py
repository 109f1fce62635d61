"""The observer seam: each error class maps to its outcome kind; a fan-out survives a bad
observer."""

from __future__ import annotations

import pytest

from watukuy.core.errors import ConfigError, Fenced, Retriable
from watukuy.core.observe import (
    Fanout,
    Observer,
    OutcomeKind,
    fanout,
    hooks,
    outcome_kind,
    parked_reason,
    status_class,
)
from watukuy.core.poll import Failure
from watukuy.declarative.errors import BadBody, StatusFailed
from watukuy.http import InvalidResponse, NotModified, Throttled, VendorError, VendorUnavailable

pytestmark = pytest.mark.unit

TEMPLATE = "https://api.example.com/{partition.data.slug}/items"


def _timed_out() -> VendorUnavailable:
    try:
        try:
            raise TimeoutError
        except TimeoutError as exc:
            raise VendorUnavailable(reason="timed out after 5s", template=TEMPLATE) from exc
    except VendorUnavailable as error:
        return error


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (Throttled(until=10.0, status=429, template=TEMPLATE), OutcomeKind.RATE_LIMITED),
        (Throttled(until=10.0, status=503, template=TEMPLATE), OutcomeKind.RATE_LIMITED),
        (NotModified(template=TEMPLATE), OutcomeKind.NOT_MODIFIED),
        (VendorError(status=500, template=TEMPLATE), OutcomeKind.SERVER_ERROR),
        (VendorError(status=503), OutcomeKind.SERVER_ERROR),
        (VendorError(status=404), OutcomeKind.CLIENT_ERROR),
        (VendorError(status=429), OutcomeKind.RATE_LIMITED),
        (StatusFailed(method="GET", template=TEMPLATE, status=401), OutcomeKind.CLIENT_ERROR),
        (StatusFailed(method="GET", template=TEMPLATE, status=502), OutcomeKind.SERVER_ERROR),
        (VendorUnavailable(reason="connection refused"), OutcomeKind.CONNECT),
        (_timed_out(), OutcomeKind.TIMEOUT),
        (TimeoutError(), OutcomeKind.TIMEOUT),
        (InvalidResponse(reason="body is not JSON"), OutcomeKind.INVALID_BODY),
        (Fenced("owned by another instance"), OutcomeKind.FENCED),
        (Retriable("kafka transaction failed"), OutcomeKind.STORE),
        (ConfigError("no such name", "request.url"), OutcomeKind.CONFIG),
        (BadBody("records is not a list"), OutcomeKind.INVALID_BODY),
        (KeyError("data"), OutcomeKind.ERROR),
        (TypeError("fetch returned a str"), OutcomeKind.ERROR),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_each_error_class_has_its_kind(error: Exception, kind: OutcomeKind) -> None:
    assert outcome_kind(error) is kind


def test_a_failure_keeps_its_kind_and_an_exception_may_name_its_own() -> None:
    assert outcome_kind(Failure(error="GET x -> 500", kind=OutcomeKind.SERVER_ERROR)) is (
        OutcomeKind.SERVER_ERROR
    )

    class Named(Exception):
        kind = OutcomeKind.SCHEMA_INVALID

    assert outcome_kind(Named()) is OutcomeKind.SCHEMA_INVALID
    assert outcome_kind("not an error") is OutcomeKind.ERROR


def test_parked_reasons_and_status_classes() -> None:
    assert parked_reason("invalid", "SchemaError: amount: not a double") is (
        OutcomeKind.SCHEMA_INVALID
    )
    assert parked_reason("invalid", "identity() returned None") is OutcomeKind.INVALID_ITEM
    assert parked_reason("poison", "handler failed") is OutcomeKind.ERROR
    assert [status_class(s) for s in (200, 304, 404, 503, None, 42)] == [
        "2xx",
        "3xx",
        "4xx",
        "5xx",
        "none",
        "none",
    ]


def test_every_observer_hook_is_a_no_op_and_the_fanout_forwards_each() -> None:
    calls: list[tuple[str, tuple[object, ...]]] = []

    class Recording(Observer):
        def __getattribute__(self, name: str) -> object:
            attribute = object.__getattribute__(self, name)
            if name.startswith("_") or not callable(attribute):
                return attribute

            def record(*args: object) -> None:
                calls.append((name, args))

            return record

    hooks = [
        name
        for name in vars(Observer)
        if not name.startswith("_") and callable(getattr(Observer, name))
    ]
    assert len(hooks) == 19
    plain, both = Observer(), Fanout([Recording(), Recording()])
    for name in hooks:
        arity = getattr(Observer, name).__code__.co_argcount - 1
        assert getattr(plain, name)(*range(arity)) is None
        getattr(both, name)(*range(arity))
    assert [name for name, _ in calls] == [name for name in hooks for _ in range(2)]


def test_a_hook_added_to_the_protocol_reaches_every_observer_through_a_fanout_unwritten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[tuple[int, str, int]] = []

    def page_rendered(self: Observer, poller: str, pages: int) -> None:
        """A hook the protocol gained."""

    monkeypatch.setattr(Observer, "page_rendered", page_rendered, raising=False)

    class Listening(Observer):
        def page_rendered(self, poller: str, pages: int) -> None:
            heard.append((id(self), poller, pages))

    class Fresh(Fanout):  # a fan-out class made after the hook was added: nothing written
        pass

    assert "page_rendered" in hooks(Fresh)
    one, two = Listening(), Listening()
    Fresh([one, two, Observer()]).page_rendered("invoices", pages=3)  # type: ignore[attr-defined]
    assert heard == [(id(one), "invoices", 3), (id(two), "invoices", 3)]


def test_a_protocol_extending_observer_forwards_its_own_hooks_too() -> None:
    failures: list[str] = []

    class Rendering(Observer):
        def page_rendered(self, poller: str, pages: int) -> None:
            """A hook of a protocol that extends the observer's."""

    class Broken(Rendering):
        def page_rendered(self, poller: str, pages: int) -> None:
            raise RuntimeError("bug")

    class Counting(Rendering):
        pages = 0

        def page_rendered(self, poller: str, pages: int) -> None:
            self.pages += pages

    class RenderingFanout(Fanout, Rendering):
        pass

    counting = Counting()
    both = RenderingFanout([Broken(), counting], on_error=lambda o, hook, e: failures.append(hook))
    both.page_rendered("invoices", 2)
    both.key_gained("invoices", "t_1")  # the base protocol's hooks still forward
    assert counting.pages == 2
    assert failures == ["page_rendered"]
    assert hooks(RenderingFanout) == (*hooks(Observer), "page_rendered")


def test_a_raising_observer_goes_to_on_error_and_the_others_still_hear() -> None:
    heard: list[str] = []
    failures: list[tuple[str, str]] = []

    class Broken(Observer):
        def key_gained(self, poller: str, partition: str) -> None:
            raise RuntimeError("bug")

    class Good(Observer):
        def key_gained(self, poller: str, partition: str) -> None:
            heard.append(f"{poller}/{partition}")

    both = fanout(
        [Broken(), Good()], on_error=lambda obs, hook, exc: failures.append((hook, str(exc)))
    )
    both.key_gained("invoices", "t_1")
    assert heard == ["invoices/t_1"]
    assert failures == [("key_gained", "bug")]
    with pytest.raises(RuntimeError):
        fanout(Broken()).key_gained("invoices", "t_1")  # no sink: a test sees its bug
    assert fanout(None).observers == ()
