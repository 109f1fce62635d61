"""An identity provider for the simulator's tenants (issue 45): OAuth2 refresh tokens that
rotate at every use, reuse detection that revokes the whole authorisation, one-hour access
tokens; and, through :mod:`.sessions`, a login-then-session-token API. Plain Python (no HTTP
here, see :mod:`.identity_http`), modelled on public documentation only:

- RFC 6749 (https://www.rfc-editor.org/rfc/rfc6749): section 6, refreshing an access token
  (``grant_type=refresh_token``, the client authenticates; "the authorization server MAY issue
  a new refresh token, in which case the client MUST discard the old refresh token");
  section 5.1, the answer (``access_token``, ``token_type``, ``expires_in``,
  ``refresh_token``); section 5.2, the errors (``invalid_client``, ``invalid_grant``, ...).
- RFC 9700, the OAuth 2.0 Security Best Current Practice, section 4.14
  (https://www.rfc-editor.org/rfc/rfc9700#section-4.14): with refresh token rotation the
  previous refresh token is invalidated and its relation kept; if it is presented again, one of
  two parties holding it is an attacker and the server cannot tell which, so it revokes the
  active refresh token: the tenant must authorise again. PingOne's "Refresh token rotation"
  (https://docs.pingidentity.com/pingone/applications/p1_refresh_token_rotation.html) also
  invalidates the access tokens on reuse, as this simulator does (the strict reading).
- Intuit's OAuth 2.0 FAQ (https://developer.intuit.com/app/developer/qbo/docs/develop/
  authentication-and-authorization/faq): access tokens are valid 3600 seconds; refresh with
  the latest ``refresh_token`` returned by the previous request. Hence ``expires_in`` 3600 by
  default; tests set seconds.

Simplifications: one authorisation per tenant (authorising again revokes the previous one's
tokens); refresh tokens never expire on their own; no reuse grace period (some providers allow
one, e.g. for a lost answer; a strict provider is what proves a connector never reuses one).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .sessions import Sessions

__all__ = [
    "CLIENT_ID",
    "CLIENT_SECRET",
    "Granted",
    "IdentityProvider",
    "Refusal",
    "Reuse",
    "Settings",
    "TokenCall",
]

CLIENT_ID = "watukuy-simulator"
CLIENT_SECRET = "simulator-client-secret"  # a test fixture, not a secret


@dataclass(frozen=True)
class Settings:
    """How the provider answers a tenant (globally, or overridden per tenant)."""

    expires_in: int = 3600
    """Seconds an access token lives (Intuit: one hour)."""
    delay: float = 0.0
    """Seconds the token endpoint's answer leaves after its work is done: the rotation is
    committed when the request arrives, so a client killed meanwhile has spent its grant
    without learning the new one (the "lost refresh" of the credentials design)."""
    rotate: bool = True
    """Issue a new refresh token at every refresh (else answer none: keep using the old)."""
    session_expires_in: int = 14400
    """Seconds a session token lives (Tableau: 240 minutes; :mod:`.sessions`)."""

    @staticmethod
    def check(options: dict[str, Any]) -> dict[str, Any]:
        """``options`` when each is a valid setting; ``ValueError`` naming the first bad one."""
        for name, value in options.items():
            if name in ("expires_in", "session_expires_in"):
                ok = type(value) is int and value >= 1
            elif name == "delay":
                ok = type(value) in (int, float) and value >= 0
            elif name == "rotate":
                ok = type(value) is bool
            else:
                raise ValueError(f"unknown identity setting {name!r}")
            if not ok:
                raise ValueError(f"bad identity setting {name}: {value!r}")
        return options


@dataclass(frozen=True)
class TokenCall:
    """One token endpoint request. ``generation``: which refresh token of authorisation
    ``family`` was presented (0 = the first grant); both ``None`` for an unknown token."""

    tenant: str | None
    family: int | None
    generation: int | None
    result: str
    """ok, reused, revoked, unknown, invalid_client, invalid_request or
    unsupported_grant_type."""
    at: float


@dataclass(frozen=True)
class Reuse:
    """A spent refresh token presented again: the provider revoked the authorisation."""

    tenant: str
    family: int
    generation: int
    at: float


@dataclass(frozen=True)
class Granted:
    """A successful refresh: the body of RFC 6749 section 5.1."""

    body: dict[str, Any]


@dataclass(frozen=True)
class Refusal:
    """A refused refresh: RFC 6749 section 5.2's ``error`` code and a description."""

    error: str
    description: str


@dataclass
class _Refresh:
    tenant: str
    family: int
    generation: int
    spent: bool = False


@dataclass
class _Family:
    """One authorisation of a tenant: the chain of refresh tokens rotated from its first."""

    number: int
    first: str
    generation: int = 0
    revoked: bool = False


@dataclass
class _Expiring:
    tenant: str
    family: int
    expires_at: float


@dataclass
class _Account:
    families: list[_Family] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


class IdentityProvider:
    """Issues and checks tokens per tenant id; every token is random (``secrets``)."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self.client_id = CLIENT_ID
        self.client_secret = CLIENT_SECRET
        self.defaults = Settings()
        self.calls: list[TokenCall] = []
        self.reuses: list[Reuse] = []
        self.sessions = Sessions(now, lambda tenant: self.settings(tenant).session_expires_in)
        self._accounts: dict[str, _Account] = {}
        self._refresh: dict[str, _Refresh] = {}
        self._access: dict[str, _Expiring] = {}

    # -- tenants and settings ---------------------------------------------------------------

    def first_grant(self, tenant: str) -> str:
        """The refresh token the tenant's current authorisation started from (what a tenants
        source hands in, even once rotated away); authorises the tenant at first sight."""
        families = self._account(tenant).families
        return (families[-1] if families else self._new_family(tenant)).first

    def authorize(self, tenant: str) -> str:
        """The tenant authorises again: a new first grant; the previous one's tokens revoked."""
        self.revoke(tenant)
        return self._new_family(tenant).first

    def revoke(self, tenant: str) -> None:
        """The tenant disconnects the app: its authorisation and sessions end."""
        for family in self._account(tenant).families:
            family.revoked = True
        self.sessions.end(tenant)

    def configure(self, tenant: str | None = None, **options: Any) -> Settings:
        """Change the settings of every tenant, or override them for one."""
        Settings.check(options)
        if tenant is None:
            self.defaults = replace(self.defaults, **options)
            return self.defaults
        self._account(tenant).settings.update(options)
        return self.settings(tenant)

    def settings(self, tenant: str | None) -> Settings:
        if tenant is None or tenant not in self._accounts:
            return self.defaults
        return replace(self.defaults, **self._accounts[tenant].settings)

    def tenant_state(self, tenant: str) -> dict[str, Any]:
        """What a test may see of a tenant: no token."""
        families = self._account(tenant).families
        last = families[-1] if families else None
        return {
            "family": None if last is None else last.number,
            "generation": None if last is None else last.generation,
            "revoked": None if last is None else last.revoked,
            "settings": asdict(self.settings(tenant)),
        }

    # -- the token endpoint -----------------------------------------------------------------

    def client_ok(self, client_id: str | None, client_secret: str | None) -> bool:
        return secrets.compare_digest(
            f"{client_id}\0{client_secret}", f"{self.client_id}\0{self.client_secret}"
        )

    def record_call(self, result: str) -> None:
        """A request refused before any token was looked at (client, grant type, form)."""
        self.calls.append(TokenCall(None, None, None, result, self._now()))

    def refresh(self, token: str) -> Granted | Refusal:
        """RFC 6749 section 6 with rotation and reuse detection (RFC 9700 section 4.14)."""
        now = self._now()
        issued = self._refresh.get(token)
        if issued is None:
            self.calls.append(TokenCall(None, None, None, "unknown", now))
            return Refusal("invalid_grant", "unknown refresh token")
        tenant, number, generation = issued.tenant, issued.family, issued.generation
        family = self._accounts[tenant].families[number - 1]
        if issued.spent:
            self.reuses.append(Reuse(tenant, number, generation, now))
            self.calls.append(TokenCall(tenant, number, generation, "reused", now))
            family.revoked = True  # either holder may be a thief: neither keeps access
            return Refusal("invalid_grant", "refresh token reused; the authorisation is revoked")
        if family.revoked:
            self.calls.append(TokenCall(tenant, number, generation, "revoked", now))
            return Refusal("invalid_grant", "the authorisation is revoked")
        settings = self.settings(tenant)
        access = f"at_{secrets.token_urlsafe(24)}"
        self._access[access] = _Expiring(tenant, number, now + settings.expires_in)
        body: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": settings.expires_in,
        }
        if settings.rotate:
            issued.spent = True
            body["refresh_token"] = self._issue(tenant, family)
        self.calls.append(TokenCall(tenant, number, generation, "ok", now))
        return Granted(body)

    def check_access(self, tenant: str, token: str | None) -> str | None:
        """Why ``token`` may not read ``tenant``'s data (RFC 6750's ``error_description``),
        or ``None`` when it may."""
        if token is None:
            return "no access token"
        held = self._access.get(token)
        if held is None or held.tenant != tenant:
            return "unknown access token"
        if self._accounts[tenant].families[held.family - 1].revoked:
            return "the access token is revoked"
        if self._now() >= held.expires_at:
            return "the access token expired"
        return None

    # -- what tests read --------------------------------------------------------------------

    def shown(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "settings": asdict(self.defaults),
            "calls": [asdict(call) for call in self.calls],
            "reuses": [asdict(reuse) for reuse in self.reuses],
            "logins": self.sessions.shown(),
            "tenants": {tenant: self.tenant_state(tenant) for tenant in self._accounts},
        }

    # -- internals --------------------------------------------------------------------------

    def _account(self, tenant: str) -> _Account:
        if tenant not in self._accounts:
            self._accounts[tenant] = _Account()
        return self._accounts[tenant]

    def _new_family(self, tenant: str) -> _Family:
        families = self._account(tenant).families
        family = _Family(number=len(families) + 1, first="")
        families.append(family)
        family.first = self._issue(tenant, family, generation=0)
        return family

    def _issue(self, tenant: str, family: _Family, generation: int | None = None) -> str:
        """A new refresh token of ``family`` (the next generation unless given)."""
        if generation is None:
            family.generation += 1
            generation = family.generation
        token = f"rt_{secrets.token_urlsafe(24)}"
        self._refresh[token] = _Refresh(tenant, family.number, generation)
        return token
