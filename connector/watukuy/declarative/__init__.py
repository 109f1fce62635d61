"""Declarative HTTP pollers: a vendor API described as data (YAML), no Python.

A ``pollers:`` entry with ``name:`` is compiled by :func:`compile_poller` into the same
:class:`~watukuy.core.poller.Poller` that ``define_poller`` makes, so the engine runs it
unchanged; an entry with ``streams:`` into one such poller per stream by
:func:`compile_connector_entry` (the one entry point for both). Where each part is described:

- :mod:`~watukuy.declarative.streams`: ``streams`` and ``defaults``; what the streams share
  per tenant is in :mod:`~watukuy.declarative.shared`;

- :mod:`~watukuy.declarative.templates`: ``{partition.key}``, ``{partition.data.NAME}``,
  ``{cursor}`` in ``url``, ``query``, ``headers``, ``body`` and ``auth`` values;
- :mod:`~watukuy.declarative.paths`: ``data.items``, ``results[0].id`` in ``records``,
  ``identity``, ``version``, ``path``, ``field``, ``key`` (the one grammar of
  :mod:`watukuy.core.paths`);
- :mod:`~watukuy.declarative.request` and :mod:`~watukuy.declarative.auth`: the request (auth
  kinds: :data:`~watukuy.declarative.auth.AUTH_KINDS`);
- :mod:`~watukuy.declarative.records`: ``records`` (where a page's items are);
- :mod:`~watukuy.declarative.paging`: ``paginate`` (pages within a poll; kinds:
  :data:`~watukuy.declarative.paging.PAGINATORS`), and :mod:`~watukuy.declarative.pages`, the
  one page step of polls and tenant listings;
- :mod:`~watukuy.declarative.cursors`: ``cursor`` (between polls; kinds:
  :data:`~watukuy.declarative.cursors.CURSORS`);
- :mod:`~watukuy.declarative.status`: ``on_status``;
- :mod:`~watukuy.declarative.tenants`: the ``http`` partition source;
- :mod:`~watukuy.options.declarative`: every key (:data:`DECLARATIVE_KEYS`), rendered for the
  docs/configuration.md by :func:`~watukuy.declarative.reference.reference_markdown`.
"""

from watukuy.declarative.compiler import compile_poller
from watukuy.declarative.streams import compile_connector_entry
from watukuy.options.declarative import DECLARATIVE_KEYS
from watukuy.options.keydoc import KeyDoc

__all__ = ["DECLARATIVE_KEYS", "KeyDoc", "compile_connector_entry", "compile_poller"]
