"""What the config loader and the declarative plugin both build on, below both of them.

- :mod:`~watukuy.options.keydoc`: a key described once (``KeyDoc``) and its Markdown table;
- :mod:`~watukuy.options.declarative`: every key of a declarative poller, as data;
- :mod:`~watukuy.options.generated`: a Markdown section written by ``python -m <module>``;
- :mod:`~watukuy.options.secrets`: ``${env:...}`` / ``${file:...}`` references (with
  :mod:`~watukuy.options.properties` for ``.properties`` files);
- :mod:`~watukuy.options.imports`: ``module:attr`` references to Python objects;
- :mod:`~watukuy.options.flat`: Connect's config form (a flat map of strings) to and from a
  nested poller config, typed by the declarative key table;
- :mod:`~watukuy.options.tls`: the REST server's TLS context, checked at load and used to serve.

``config`` dispatches to ``declarative``; neither is imported from here.
"""
