"""The REST server's TLS context, built from ``rest.tls`` (both PEM files).

Below ``config`` and ``rest``: the config loader builds it once at load to check that the files
are a readable pair, and the server builds it again to serve with.
"""

from __future__ import annotations

import ssl
from pathlib import Path


class TlsError(ValueError):
    """The certificate or key cannot be loaded (unreadable, not PEM, or not a pair)."""


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server-side context with the library's secure defaults (TLS 1.2+, no compression)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile=str(cert), keyfile=str(key))
    except ssl.SSLError as exc:
        reason = exc.reason or exc.strerror or type(exc).__name__
        raise TlsError(
            f"cannot load the certificate and key ({reason}): both must be PEM files, the key "
            "unencrypted and matching the certificate"
        ) from None
    except OSError as exc:
        raise TlsError(f"cannot read the certificate or key: {exc.strerror}") from None
    return context
