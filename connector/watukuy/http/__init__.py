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
from watukuy.http.response import Response

__all__ = [
    "HttpClient",
    "InvalidResponse",
    "KeyHttp",
    "NotModified",
    "Response",
    "Throttled",
    "VendorError",
    "VendorUnavailable",
    "build_url",
    "redact_url",
    "validator_key",
]
