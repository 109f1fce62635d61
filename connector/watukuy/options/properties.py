"""Java ``.properties`` files, as Kafka Connect's FileConfigProvider reads them.

Parsed by ``javaproperties``, which follows ``java.util.Properties.load`` (comments, the three
separators, line continuations, ``\\uXXXX`` escapes); a later duplicate key wins, as in Java.
"""

from __future__ import annotations


def parse_properties(text: str) -> dict[str, str]:
    """Every key of ``text`` with its value."""
    import javaproperties  # here: only a ${file:...} of a .properties file needs it (80 ms)

    return dict(javaproperties.loads(text))
