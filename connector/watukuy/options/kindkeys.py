"""The keys of the kinds a declarative request is made of, as data (see
:mod:`watukuy.options.declarative`): ``auth``, ``paginate`` and ``cursor``, each a mapping of
alternatives (``one_of``) with one entry per kind. A kind added here needs its parser in the
kind's table (``AUTH_KINDS``, ``PAGINATORS``, ``CURSORS``): a test holds them together."""

from __future__ import annotations

from watukuy.options.keydoc import KeyDoc

__all__ = ["auth_keys", "cursor_keys", "paginate_keys"]


def auth_keys(prefix: str, templates: bool) -> list[KeyDoc]:
    value = "template" if templates else "string"
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
        KeyDoc(
            f"{prefix}.oauth2",
            "mapping",
            None,
            "OAuth2 client credentials: the token is cached until it expires and fetched "
            "again after a 401 (the request is retried once).",
        ),
        KeyDoc(f"{prefix}.oauth2.token_url", value, None, "Token endpoint (POST).", required=True),
        KeyDoc(f"{prefix}.oauth2.client_id", value, None, "Client id.", required=True),
        KeyDoc(
            f"{prefix}.oauth2.client_secret",
            value,
            None,
            "Client secret.",
            required=True,
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
