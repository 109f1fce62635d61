"""``request``: the HTTP request of each page, compiled once and rendered per partition.

    request:
      url: "https://api.example.com/{partition.data.slug}/tickets"
      method: GET                  # GET | POST
      query: {limit: 100}          # template values
      headers: {Accept: application/json}
      body: {filter: {since: "{cursor}"}}   # JSON, POST only; template strings anywhere
      timeout: 30s
      auth: {bearer: "{partition.data.token}"}

Also used, without placeholders, by the ``http`` partition source
(:mod:`watukuy.declarative.tenants`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.validation import kind
from watukuy.declarative.auth import Auth, TokenCache, parse_auth
from watukuy.declarative.errors import RenderError
from watukuy.declarative.templates import Placeholder, Scope, Template
from watukuy.declarative.values import choice, duration, section

__all__ = ["Body", "Rendered", "RequestSpec", "parse_request"]

Compile = Callable[[object, str], Template]

Body = Template | Mapping[str, "Body"] | list["Body"] | int | float | bool | None
"""A JSON body with its strings compiled as templates."""


@dataclass(frozen=True, slots=True)
class Rendered:
    url: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any


@dataclass(frozen=True, slots=True)
class RequestSpec:
    url: Template
    method: str
    query: tuple[tuple[str, Template], ...]
    headers: tuple[tuple[str, Template], ...]
    body: Body
    timeout: float | None
    auth: Auth | None

    @property
    def templates(self) -> list[Template]:
        """Every template of the request, auth's included."""
        out = [self.url, *(t for _, t in self.query), *(t for _, t in self.headers)]
        out.extend(_body_templates(self.body))
        if self.auth is not None:
            out.extend(self.auth.templates)
        return out

    def render(self, scope: Scope) -> Rendered:
        url = self.url.render(scope)
        if not url:
            raise RenderError(f"{self.url.where}: renders nothing")
        return Rendered(
            url=url,
            query=_pairs(self.query, scope),
            headers=_pairs(self.headers, scope),
            json=None if self.body is None else _render_body(self.body, scope),
        )


def parse_request(
    raw: object,
    path: str,
    where: str,
    compile_value: Compile,
    tokens: TokenCache | None = None,
    connector: str | None = None,
) -> RequestSpec:
    """The ``request`` section (``path`` in the key table: ``request`` or ``partitions.http``);
    ``tokens`` is an OAuth2 token cache to share (see :func:`parse_auth`)."""
    given = section(raw, path, where)
    method = choice(given.get("method"), f"{where}.method", f"{path}.method", ("GET", "POST"))
    body_raw = given.get("body")
    if method != "POST" and body_raw is not None:
        if body_raw != {}:  # an empty one is harmless: the contract's example shows body: {}
            raise ConfigError("a body needs method: POST", f"{where}.body")
        body_raw = None
    timeout = given.get("timeout")
    auth = given.get("auth")
    url = _url(given, where, compile_value)
    return RequestSpec(
        url=url,
        method=method,
        query=_named(given.get("query"), f"{where}.query", compile_value),
        headers=_named(given.get("headers"), f"{where}.headers", compile_value),
        body=None if body_raw is None else _compile_body(body_raw, f"{where}.body", compile_value),
        timeout=None if timeout is None else duration(timeout, f"{where}.timeout"),
        auth=None
        if auth is None
        else parse_auth(auth, f"{path}.auth", f"{where}.auth", compile_value, tokens, connector),
    )


def _url(given: Mapping[str, Any], where: str, compile_value: Compile) -> Template:
    """``url``, or ``path`` joined to ``base`` (the streams of a connector share a base in
    ``defaults`` and each names its own path)."""
    has_base, has_path = "base" in given, "path" in given
    if "url" in given:
        if has_base or has_path:
            given_too = " and ".join(name for name in ("base", "path") if name in given)
            raise ConfigError(f"set url, or base and path; not url and {given_too}", where)
        url = compile_value(given["url"], f"{where}.url")
        _check_scheme(url, f"{where}.url")
        return url
    if not has_base and not has_path:
        raise ConfigError("is required: set url, or base and path", f"{where}.url")
    if not has_base:
        raise ConfigError("is required with request.path: the URL it is joined to", f"{where}.base")
    if not has_path:
        raise ConfigError("is required with request.base: joined to it", f"{where}.path")
    base = compile_value(given["base"], f"{where}.base")
    _check_scheme(base, f"{where}.base")
    tail = compile_value(given["path"], f"{where}.path")
    first = tail.parts[0] if tail.parts else ""
    if isinstance(first, str) and first.lower().startswith(("http://", "https://")):
        raise ConfigError("is joined to base: write url for an absolute URL", f"{where}.path")
    return join_url(base, tail, f"{where}.path")


def join_url(base: Template, tail: Template, where: str) -> Template:
    """``base`` and ``tail`` with exactly one ``/`` between them: ``.../v1`` + ``items`` and
    ``.../v1/`` + ``/items`` both give ``.../v1/items``. An empty ``tail`` is ``base``."""
    if not tail.parts:
        return replace(base, where=where)
    left, right = list(base.parts), list(tail.parts)
    if left and isinstance(left[-1], str):
        left[-1] = left[-1].rstrip("/")
        if not left[-1]:
            left.pop()
    if isinstance(right[0], str):
        right[0] = right[0].lstrip("/")
        if not right[0]:
            right.pop(0)
    parts: list[str | Placeholder] = [*left]
    for part in ["/", *right]:
        if isinstance(part, str) and parts and isinstance(parts[-1], str):
            parts[-1] += part
        else:
            parts.append(part)
    text = base.text.rstrip("/") + "/" + tail.text.lstrip("/")
    shown = base.shown.rstrip("/") + "/" + tail.shown.lstrip("/")
    return Template(text=text, where=where, parts=tuple(parts), shown=shown)


def _check_scheme(url: Template, where: str) -> None:
    """An URL whose text starts literally must start with http:// or https://; one that starts
    with a placeholder (``{partition.data.base_url}/items``) is checked when it is sent."""
    first = url.parts[0] if url.parts else ""
    if isinstance(first, str) and not first.lower().startswith(("http://", "https://")):
        raise ConfigError("must be an absolute http:// or https:// URL", where)


def _named(raw: object, where: str, compile_value: Compile) -> tuple[tuple[str, Template], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping of names to values, got {kind(raw)}", where)
    out: list[tuple[str, Template]] = []
    for name, value in raw.items():
        at = f"{where}.{name}"
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("names must be non-empty strings", at)
        if value is None or isinstance(value, Mapping | list):
            raise ConfigError(f"must be a string or a number, got {kind(value)}", at)
        out.append((name, compile_value(value, at)))
    return tuple(out)


def _compile_body(raw: object, where: str, compile_value: Compile) -> Body:
    if isinstance(raw, str):
        return compile_value(raw, where)
    if isinstance(raw, Mapping):
        out: dict[str, Body] = {}
        for name, value in raw.items():
            if not isinstance(name, str):
                raise ConfigError(f"JSON keys must be strings, got {kind(name)}", f"{where}.{name}")
            out[name] = _compile_body(value, f"{where}.{name}", compile_value)
        return out
    if isinstance(raw, list):
        return [_compile_body(value, f"{where}[{i}]", compile_value) for i, value in enumerate(raw)]
    if raw is None or isinstance(raw, bool | int | float):
        return raw
    raise ConfigError(
        f"must be JSON (mapping, list, string, number, boolean, null), got {kind(raw)}", where
    )


def _body_templates(body: Body) -> list[Template]:
    if isinstance(body, Template):
        return [body]
    if isinstance(body, Mapping):
        return [t for value in body.values() for t in _body_templates(value)]
    if isinstance(body, list):
        return [t for value in body for t in _body_templates(value)]
    return []


def _render_body(body: Body, scope: Scope) -> Any:
    if isinstance(body, Template):
        return body.value(scope)
    if isinstance(body, Mapping):
        return {name: _render_body(value, scope) for name, value in body.items()}
    if isinstance(body, list):
        return [_render_body(value, scope) for value in body]
    return body


def _pairs(pairs: tuple[tuple[str, Template], ...], scope: Scope) -> dict[str, str]:
    """Rendered name -> value; a value that is one placeholder rendering nothing is left out."""
    out: dict[str, str] = {}
    for name, template in pairs:
        text = template.render(scope)
        if text is not None:
            out[name] = text
    return out
