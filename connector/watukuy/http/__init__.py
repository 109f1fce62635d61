"""The HTTP client handed to ``fetch``: validators, rate-limit headers, timeouts."""
