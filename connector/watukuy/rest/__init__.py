"""The Kafka Connect-style REST API.

:func:`start_rest` serves it on ``rest.listen`` over a :class:`Control` (the runner's seam);
:func:`build_app` is the aiohttp application alone. A partition key ``''`` (an unpartitioned
connector's only key) is written ``~`` in paths and queries.
"""

from watukuy.rest.errors import BadRequest, Conflict, NotFound
from watukuy.rest.openapi import openapi_document
from watukuy.rest.port import Control
from watukuy.rest.server import RestServer, build_app, start_rest

__all__ = [
    "BadRequest",
    "Conflict",
    "Control",
    "NotFound",
    "RestServer",
    "build_app",
    "openapi_document",
    "start_rest",
]
