"""A transport that answers from a script: vendor APIs as data, for tests and examples.

Like ``httpx.MockTransport``, it is a real implementation of the seam, not a patch: the
client above it runs unchanged. Routes match a method and a URL without its query; each
route answers with fixed responses (in turn, the last one repeating) or with a function of
the request. Every request is recorded, so a test asserts what the vendor would have seen.

    transport = ScriptedTransport()
    transport.add("GET", "https://api.test/acme/items", json={"data": [], "next": None})
    transport.add("GET", "https://api.test/acme/items", handler=lambda request: reply(500))
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from watukuy.http.transport import RawResponse, Request, TransportError, frozen_headers

__all__ = ["ScriptedTransport", "Unreachable", "reply"]

Handler = Callable[[Request], "RawResponse | BaseException"]


class Unreachable(TransportError):
    """What a route answers to simulate a refused connection."""

    def __init__(self, reason: str = "connection failed (scripted)") -> None:
        super().__init__(reason)


def reply(
    status: int = 200,
    *,
    json: Any = None,
    body: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> RawResponse:
    """A response: ``json`` is serialised (and typed) for you; ``body`` is sent as is."""
    all_headers = dict(headers or {})
    if json is not None:
        data = jsonlib.dumps(json).encode()
        all_headers.setdefault("Content-Type", "application/json")
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = body or b""
    return RawResponse(status=status, headers=frozen_headers(all_headers), body=data)


@dataclass(slots=True)
class _Route:
    method: str
    url: str
    answers: list[RawResponse | BaseException] = field(default_factory=list)
    handler: Handler | None = None
    served: int = 0

    def answer(self, request: Request) -> RawResponse | BaseException:
        self.served += 1
        if self.handler is not None:
            return self.handler(request)
        index = min(self.served - 1, len(self.answers) - 1)
        return self.answers[index]


class ScriptedTransport:
    """Answers requests from routes added with :meth:`add`; see the module docstring."""

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], _Route] = {}
        self.requests: list[Request] = []
        self.closed = False

    def add(
        self,
        method: str,
        url: str,
        *responses: RawResponse | BaseException,
        json: Any = None,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        handler: Handler | None = None,
    ) -> None:
        """Route ``method url`` (the query is ignored when matching).

        Give ``responses`` (served in turn, the last repeating), or ``json``/``status``/
        ``headers`` for one response, or a ``handler(request)``. Adding a route again
        replaces it.
        """
        answers = list(responses)
        if handler is None and not answers:
            answers = [reply(status, json=json, headers=headers)]
        key = (method.upper(), _route_url(URL(url)))
        self._routes[key] = _Route(key[0], key[1], answers, handler)

    def served(self, method: str, url: str) -> int:
        """How many requests the route ``method url`` answered."""
        route = self._routes.get((method.upper(), _route_url(URL(url))))
        return 0 if route is None else route.served

    async def send(self, request: Request) -> RawResponse:
        if self.closed:
            raise RuntimeError("HttpClient is closed")
        self.requests.append(request)
        route = self._routes.get((request.method, _route_url(request.url)))
        if route is None:
            return reply(404, json={"error": "no scripted route"})
        answer = route.answer(request)
        if isinstance(answer, BaseException):
            raise answer
        return RawResponse(
            status=answer.status,
            headers=answer.headers,
            body=answer.body,
            url=answer.url or str(request.url),
            charset=answer.charset,
        )

    async def close(self) -> None:
        self.closed = True

    def reopen(self) -> None:
        self.closed = False


def _route_url(url: URL) -> str:
    return str(url.with_query(None).with_fragment(None))
