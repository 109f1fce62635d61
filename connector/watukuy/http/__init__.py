"""The HTTP client handed to ``fetch``: validators, rate-limit headers, timeouts."""

from watukuy.http.client import HttpClient, KeyHttp, build_url, validator_key
from watukuy.http.errors import (
    InvalidResponse,
    NotModified,
    Throttled,
    VendorError,
    VendorUnavailable,
    redact_url,
)
from watukuy.http.http11 import Http11Transport
from watukuy.http.response import Response
from watukuy.http.scripted import ScriptedTransport, reply
from watukuy.http.transport import AiohttpTransport, RawResponse, Request, Transport, TransportError

__all__ = [
    "AiohttpTransport",
    "Http11Transport",
    "HttpClient",
    "InvalidResponse",
    "KeyHttp",
    "NotModified",
    "RawResponse",
    "Request",
    "Response",
    "ScriptedTransport",
    "Throttled",
    "Transport",
    "TransportError",
    "VendorError",
    "VendorUnavailable",
    "build_url",
    "redact_url",
    "reply",
    "validator_key",
]
