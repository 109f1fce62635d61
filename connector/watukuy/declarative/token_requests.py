"""Asking an endpoint for a token, as the auth kinds that renew one do: OAuth2's client
credentials (RFC 6749 §4.4) and refresh (§6) grants, and a session's login.

Each kind decides what its answer means; here is what they share: the client's credentials in
a token request's form or in the basic scheme (§2.3.1), one request whose failure to answer
names the kind's request and never the rendered URL (it carries partition data), the answers
that are not a success, and a bearer token in a JSON object (§5.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from watukuy.declarative.auth_common import ALL_STATUSES, ERROR_CODE, basic_header, json_or_none
from watukuy.declarative.errors import OAuthError, OAuthUnavailable
from watukuy.http import KeyHttp, VendorUnavailable

__all__ = ["ask", "bearer_answer", "expires_in", "token_form", "unanswered"]


def token_form(
    form: Mapping[str, str], client_id: str, secret: str | None, client_auth: str
) -> tuple[str, dict[str, str]]:
    """A token request's body and headers with the client's credentials: in the form (``body``,
    or a public client without a secret, which sends its id alone), else the basic scheme with
    both form-encoded first (§2.3.1)."""
    fields = dict(form)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if secret is None or client_auth == "body":
        fields["client_id"] = client_id
        if secret is not None:
            fields["client_secret"] = secret
    else:
        headers["Authorization"] = basic_header(quote(client_id, safe=""), quote(secret, safe=""))
    return urlencode(fields), headers


async def ask(
    http: KeyHttp,
    method: str,
    url: str,
    *,
    what: str,
    shown: str,
    headers: Mapping[str, str],
    data: str | None = None,
    json: Any = None,
) -> tuple[int, Any]:
    """One request to a token endpoint: ``(status, JSON body or None)``, every status
    returned. ``what`` names it in errors (``oauth2 token request``), ``shown`` is its URL as
    the config writes it."""
    try:
        response = await http.request(
            method,
            url,
            headers={"Accept": "application/json", **headers},
            data=data,
            json=json,
            template=shown,
            passthrough=ALL_STATUSES,
        )
    except VendorUnavailable as exc:  # its text names the rendered URL: not ours to show
        raise OAuthUnavailable(f"{what} failed: {exc.reason}") from None
    return response.status, await json_or_none(response)


def unanswered(status: int, body: Any, what: str, hint: str = "") -> None:
    """Raise for an answer that is not a success: 429 and 5xx may pass (``OAuthUnavailable``,
    tried again later), any other status needs the config or the grant looked at
    (``OAuthError``, with the endpoint's ``error`` code when it is a plain one, and ``hint``)."""
    if status == 429 or status >= 500:
        raise OAuthUnavailable(f"{what} -> {status}")
    if not 200 <= status < 300:
        code = body.get("error") if isinstance(body, Mapping) else None
        detail = f" ({code})" if isinstance(code, str) and ERROR_CODE.match(code) else ""
        raise OAuthError(f"{what} -> {status}{detail}{hint}")


def bearer_answer(status: int, body: Any, what: str) -> tuple[str, Mapping[str, Any]]:
    """The access token of a successful answer (§5.1), and the answer; ``OAuthError`` for
    one that is not a JSON object, has no token, or a token type other than bearer."""
    if not isinstance(body, Mapping):
        raise OAuthError(f"{what} -> {status}: the answer is not a JSON object")
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise OAuthError(f"{what} -> {status}: the answer has no access_token")
    kind = body.get("token_type", "bearer")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise OAuthError(f"{what} -> {status}: the token type is not bearer")
    return token, body


def expires_in(value: object) -> float | None:
    """``expires_in`` in seconds (a positive number, or digits in a string); ``None`` when it
    says nothing usable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value > 0:
        return float(value)
    if isinstance(value, str) and value.strip().isdigit():
        return float(value.strip())
    return None
