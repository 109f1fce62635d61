"""The keys of the kinds a declarative request is made of, as data (see
:mod:`watukuy.options.declarative`): ``auth``, ``paginate`` and ``cursor``, each a mapping of
alternatives (``one_of``) with one entry per kind. A kind added here needs its parser in the
kind's table (``AUTH_KINDS``, ``PAGINATORS``, ``CURSORS``): a test holds them together."""

from __future__ import annotations

from watukuy.options.keydoc import KeyDoc

__all__ = ["auth_keys", "cursor_keys", "paginate_keys"]


def auth_keys(prefix: str, templates: bool) -> list[KeyDoc]:
    """``templates``: a request's auth, which may keep tenants' grants (a refresh token per
    tenant); a tenants listing's (``False``) authenticates the connector alone."""
    keys = _auth_keys(prefix, "template" if templates else "string")
    if templates:
        return keys
    tenants_only = tuple(f"{prefix}.oauth2.{k}" for k in _PER_TENANT)
    return [k for k in keys if not k.path.startswith(tenants_only)]


_PER_TENANT = ("refresh_token", "expires", "refresh_early")


def _auth_keys(prefix: str, value: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            f"{prefix}",
            "mapping",
            None,
            "Authentication; exactly one of the keys below.",
            one_of=True,
        ),
        KeyDoc(
            f"{prefix}.bearer", value, None, "Sends `Authorization: Bearer <value>`.", secret=True
        ),
        KeyDoc(f"{prefix}.basic", "mapping", None, "HTTP basic authentication."),
        KeyDoc(f"{prefix}.basic.username", value, None, "User name.", required=True),
        KeyDoc(f"{prefix}.basic.password", value, None, "Password.", required=True, secret=True),
        KeyDoc(
            f"{prefix}.api_key",
            "mapping",
            None,
            "An API key in a header or a query parameter (exactly one of `header`, `query`).",
        ),
        KeyDoc(f"{prefix}.api_key.header", "string", None, "Header name, e.g. `X-Api-Key`."),
        KeyDoc(f"{prefix}.api_key.query", "string", None, "Query parameter name."),
        KeyDoc(f"{prefix}.api_key.value", value, None, "The key.", required=True, secret=True),
        *_oauth2_keys(prefix, value),
        *_session_keys(prefix, value),
    ]


def _oauth2_keys(prefix: str, value: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            f"{prefix}.oauth2",
            "mapping",
            None,
            "OAuth2: the client-credentials grant (a token per client, cached until it "
            "expires), or each tenant's refresh token (`grant: refresh_token`: refreshed ahead "
            "of expiry by one caller across every stream and runner, rotated grants kept in the "
            "credential store). A 401 renews the token once and sends the request again.",
        ),
        KeyDoc(
            f"{prefix}.oauth2.grant",
            "client_credentials | refresh_token",
            "client_credentials",
            "The grant: the client's own, or the refresh token each tenant authorised.",
        ),
        KeyDoc(f"{prefix}.oauth2.token_url", value, None, "Token endpoint (POST).", required=True),
        KeyDoc(f"{prefix}.oauth2.client_id", value, None, "Client id.", required=True),
        KeyDoc(
            f"{prefix}.oauth2.client_secret",
            value,
            None,
            "Client secret (required for client_credentials; a public client of the "
            "refresh_token grant has none).",
            secret=True,
        ),
        KeyDoc(f"{prefix}.oauth2.scope", value, None, "Requested scope (space-separated)."),
        KeyDoc(
            f"{prefix}.oauth2.client_auth",
            "basic | body",
            "basic",
            "How the client authenticates: HTTP basic, or `client_id`/`client_secret` in "
            "the form body.",
        ),
        *_refresh_grant_keys(prefix, value),
    ]


def _refresh_grant_keys(prefix: str, value: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            f"{prefix}.oauth2.refresh_token",
            value,
            None,
            "`grant: refresh_token`: the tenant's first grant, as the tenants source hands it "
            "in (`{partition.data.refresh_token}`). A newer grant in the credential store wins "
            "over it; a grant the store does not know is a re-authorisation and replaces it.",
            secret=True,
        ),
        KeyDoc(
            f"{prefix}.oauth2.expires",
            "mapping",
            None,
            "`grant: refresh_token`: where the token answer says when the access token "
            "expires. Without it, or when the answer lacks the field: 1 hour.",
        ),
        KeyDoc(
            f"{prefix}.oauth2.expires.path",
            "path",
            "expires_in",
            "The field of the token answer.",
        ),
        KeyDoc(
            f"{prefix}.oauth2.expires.format",
            "seconds | iso | epoch | epoch_ms",
            "seconds",
            "`seconds`: a lifetime from now (`expires_in`); the others: the time it expires.",
        ),
        KeyDoc(
            f"{prefix}.oauth2.refresh_early",
            "duration",
            "5m",
            "`grant: refresh_token`: refresh this long before the access token expires.",
        ),
    ]


def _session_keys(prefix: str, value: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            f"{prefix}.session",
            "mapping",
            None,
            "Log in, then send the token the login answered until it expires (or a 401): for "
            "APIs with session logins. One login per tenant shared by the connector's streams.",
        ),
        KeyDoc(f"{prefix}.session.login", "mapping", None, "The login request.", required=True),
        KeyDoc(f"{prefix}.session.login.url", value, None, "Login URL.", required=True),
        KeyDoc(f"{prefix}.session.login.method", "POST | GET | PUT", "POST", "Login method."),
        KeyDoc(
            f"{prefix}.session.login.body",
            "mapping",
            None,
            "JSON body of the login (values are templates: `{partition.data.password}`).",
            secret=True,
        ),
        KeyDoc(
            f"{prefix}.session.login.headers", "mapping", None, "Headers of the login (templates)."
        ),
        KeyDoc(
            f"{prefix}.session.token",
            "mapping",
            None,
            "Where the login answer holds the token: `{path: token}`.",
            required=True,
        ),
        KeyDoc(f"{prefix}.session.token.path", "path", None, "Its path.", required=True),
        KeyDoc(
            f"{prefix}.session.header",
            "mapping",
            None,
            'The headers that carry it: `{X-Session: "{session.token}"}` (default: '
            "`Authorization: Bearer {session.token}`).",
        ),
        KeyDoc(
            f"{prefix}.session.expires",
            "duration",
            "1h",
            "How long a session lasts (it is renewed earlier after a 401).",
        ),
    ]


def paginate_keys(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "Pages within one poll; exactly one of the kinds below, and `stop` beside it. "
            "Without it: one page. A kind that would send the same page twice in one listing "
            "stops it with an error on the key.",
            one_of=True,
        ),
        *_next_token(f"{prefix}.next_token"),
        KeyDoc(
            f"{prefix}.next_url",
            "mapping",
            None,
            "A URL in the body names the next page (Zendesk's `next_page`, Twilio's relative "
            "`next_page_uri`, `links.next`); stop when it is null, absent or ''. Absolute or "
            "relative to the page it came from; same origin only; its query replaces the "
            "request's. Never stored: a listing taken over by another runner starts again "
            "from its first page (the snapshot keeps it from publishing twice).",
        ),
        KeyDoc(
            f"{prefix}.next_url.path", "path", None, "Where the URL is in the body.", required=True
        ),
        KeyDoc(
            f"{prefix}.link_header",
            "true",
            None,
            'Follow `Link: <...>; rel="next"` (same origin only).',
        ),
        *_page_numbers(f"{prefix}.page"),
        *_offsets(f"{prefix}.offset"),
        KeyDoc(
            f"{prefix}.stop",
            "mapping",
            None,
            "Beside any kind: a filter on the page's body (the form of `transform.filter`); "
            "a page it matches is the last (`{path: meta.has_more, equals: false}`).",
            beside=True,
        ),
    ]


def _next_token(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "A token in the body names the next page; stop when it is null, absent or ''. "
            "Exactly one of `param` and `body`.",
        ),
        KeyDoc(f"{prefix}.path", "path", None, "Where the token is in the body.", required=True),
        KeyDoc(f"{prefix}.param", "string", None, "Query parameter the token is sent in."),
        KeyDoc(
            f"{prefix}.body",
            "path",
            None,
            "Where the token goes in the JSON body (GraphQL `variables.after`, a search "
            "endpoint's cursor); needs `request.method: POST`.",
        ),
    ]


def _page_numbers(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "Page numbers; stop on a short page. Exactly one of `param` and `body`.",
        ),
        KeyDoc(f"{prefix}.param", "string", None, "Query parameter of the page number."),
        KeyDoc(f"{prefix}.body", "path", None, "Where the page number goes in the JSON body."),
        KeyDoc(f"{prefix}.start", "int", 1, "The first page's number."),
        *_sizes(prefix),
    ]


def _offsets(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "Record offsets; stop on a short page. Exactly one of `param` and `body`.",
        ),
        KeyDoc(f"{prefix}.param", "string", None, "Query parameter of the offset (from 0)."),
        KeyDoc(f"{prefix}.body", "path", None, "Where the offset goes in the JSON body."),
        *_sizes(prefix),
    ]


def _sizes(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(f"{prefix}.size_param", "string", None, "Query parameter of the page size."),
        KeyDoc(f"{prefix}.size_body", "path", None, "Where the page size goes in the JSON body."),
        KeyDoc(
            f"{prefix}.size",
            "int",
            None,
            "Page size; a page with fewer records is the last.",
            required=True,
        ),
    ]


def cursor_keys(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "Kept between polls; exactly one of the keys below. Without it: `none`.",
            one_of=True,
        ),
        KeyDoc(
            f"{prefix}.token",
            "mapping",
            None,
            "A token in the last page's body, sent on the next poll (the previous one is kept "
            "when the last page has none).",
        ),
        KeyDoc(
            f"{prefix}.token.path", "path", None, "Where the token is in the body.", required=True
        ),
        KeyDoc(
            f"{prefix}.token.param",
            "string",
            None,
            "Query parameter it is sent in (or use `{cursor}` in a template).",
        ),
        *_timestamp(f"{prefix}.timestamp"),
        KeyDoc(
            f"{prefix}.none",
            "true",
            None,
            "Full listing each poll; the snapshot finds the changes.",
        ),
    ]


_FORMATS = "`iso`, `epoch`, `epoch_ms`, `epoch_us` or a strftime pattern (`%Y%m%d`)"


def _timestamp(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            prefix,
            "mapping",
            None,
            "A time window. Open-ended (only a start is sent): from the newest item `field` "
            "seen. Windowed (an end is sent: `end_param`, `end_body`, `{cursor.end}`, `end` "
            "or `step`): from where the last committed window ended to `end`; the cursor "
            "moves only past windows whose pages all committed.",
        ),
        KeyDoc(f"{prefix}.field", "path", None, "Path of the item's time.", required=True),
        KeyDoc(
            f"{prefix}.field_format",
            "string",
            None,
            f"How items write `field`: {_FORMATS}. Declared, an item whose `field` it cannot "
            "read is parked `invalid`; absent, ISO-8601 or epoch seconds are read and other "
            "values ignored.",
        ),
        KeyDoc(
            f"{prefix}.param",
            "string",
            None,
            "Query parameter the window's start is sent in (or `body`, or `{cursor}` / "
            "`{cursor.start}` in a template).",
        ),
        KeyDoc(
            f"{prefix}.body",
            "path",
            None,
            "Where the window's start goes in the JSON body (`query.updated.gte`); needs "
            "`request.method: POST`.",
        ),
        KeyDoc(f"{prefix}.format", "string", "iso", f"How the window is sent: {_FORMATS}."),
        *_window_bounds(prefix),
    ]


def _window_bounds(prefix: str) -> list[KeyDoc]:
    return [
        KeyDoc(
            f"{prefix}.end_param",
            "string",
            None,
            "Query parameter the window's end is sent in (or `end_body`, or `{cursor.end}`).",
        ),
        KeyDoc(f"{prefix}.end_body", "path", None, "Where the window's end goes in the body."),
        KeyDoc(
            f"{prefix}.end",
            "string",
            "now",
            "The window's end: `now` or `now-DURATION`, for vendors whose recent writes settle "
            "late (a window not open yet sends nothing).",
        ),
        KeyDoc(
            f"{prefix}.step",
            "duration",
            None,
            "Windows of at most this length, oldest first (a vendor's maximum span); each "
            "window's pages commit before the next begins, and a restart goes on from the "
            "last committed window.",
        ),
        KeyDoc(
            f"{prefix}.start",
            "string",
            None,
            "A key's first window start: a template (`{partition.data.start_date}`, an "
            "ISO-8601 date or the `format`), an ISO-8601 date, or a duration back from now "
            "(`730d`). Absent: no lower bound. A start that cannot be read fails the key.",
        ),
        KeyDoc(
            f"{prefix}.lookback",
            "duration",
            "0s",
            "Each window is asked from this much earlier, to re-read late writes (the "
            "snapshot drops what did not change).",
        ),
    ]
