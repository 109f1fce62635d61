"""A login-then-session-token API for the simulator's tenants (issue 45's ``auth.session``),
modelled on Tableau's REST API "Signing In and Signing Out" (https://help.tableau.com/current/
api/rest_api/en-us/REST/rest_api_concepts_auth.htm): sign in with a user name and password, get
a credentials token, send it in a header of its own (``X-Tableau-Auth``) with every request; it
is valid 240 minutes by default (Tableau's knowledge article 001498381), after which requests
are answered 401 until the client signs in again. Here the header is ``X-Session`` and the
lifetime the identity provider's ``session_expires_in`` setting. Plain Python: the HTTP side is
in :mod:`.identity_http`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Login", "Sessions"]


@dataclass(frozen=True)
class Login:
    """One login attempt (``tenant`` ``None``: an unknown user name)."""

    tenant: str | None
    result: str  # ok or invalid_credentials
    at: float


@dataclass(frozen=True)
class _Session:
    tenant: str
    expires_at: float


class Sessions:
    """Each tenant's password (random, made at first sight) and its live session tokens."""

    def __init__(self, now: Callable[[], float], lifetime: Callable[[str], int]) -> None:
        self._now = now
        self._lifetime = lifetime
        self.logins: list[Login] = []
        self._passwords: dict[str, str] = {}
        self._sessions: dict[str, _Session] = {}

    def password(self, tenant: str) -> str:
        if tenant not in self._passwords:
            self._passwords[tenant] = f"pw_{secrets.token_urlsafe(12)}"
        return self._passwords[tenant]

    def login(self, tenant: str | None, password: object) -> tuple[str, int] | None:
        """A session token and its lifetime (seconds), or ``None`` for wrong credentials."""
        now = self._now()
        known = None if tenant is None else self._passwords.get(tenant)
        if (
            tenant is None
            or known is None
            or not isinstance(password, str)
            or not secrets.compare_digest(password, known)
        ):
            self.logins.append(Login(tenant, "invalid_credentials", now))
            return None
        lifetime = self._lifetime(tenant)
        token = f"ss_{secrets.token_urlsafe(24)}"
        self._sessions[token] = _Session(tenant, now + lifetime)
        self.logins.append(Login(tenant, "ok", now))
        return token, lifetime

    def check(self, tenant: str, token: str | None) -> bool:
        """Whether ``token`` is a live session of ``tenant``."""
        held = None if token is None else self._sessions.get(token)
        return held is not None and held.tenant == tenant and self._now() < held.expires_at

    def end(self, tenant: str) -> None:
        """Every session of ``tenant`` ends (its authorisation was revoked)."""
        for token in [t for t, s in self._sessions.items() if s.tenant == tenant]:
            del self._sessions[token]

    def shown(self) -> list[dict[str, Any]]:
        return [asdict(login) for login in self.logins]
