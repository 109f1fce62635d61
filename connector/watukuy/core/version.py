"""The package's version, at the bottom so that every layer may read it (the CLI's
``--version``, REST's ``GET /`` and ``/openapi.json``, the Kafka clients' ``client.software``)
without importing the package root, which is the public facade only."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
