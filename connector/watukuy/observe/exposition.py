"""Prometheus' text format (0.0.4), written from the metrics' own numbers.

prometheus_client's ``generate_latest`` builds every sample as an object and formats each line
through several calls (label names checked, values escaped one by one): about 13 µs a sample,
so 1.1-1.8 s of CPU for the 90,000 samples of 10,000 keys, and no library writes the format
faster from Python. The per-key families are written here instead, from label text made once
per series and key (the same label text for every scrape) and numbers formatted as
prometheus_client formats them. The bytes are the same as ``generate_latest``'s, which
``tests/observe/test_exposition.py`` checks against a reference built on prometheus_client.

What is written, as ``generate_latest`` writes it: a ``# HELP`` line (backslashes and newlines
escaped) and a ``# TYPE`` line per family, counters named with ``_total``; then one line per
sample, ``name{labels} value``, labels sorted by name, values escaped (backslash, newline,
double quote), numbers through ``floatToGoString``. Every name here is a legal Prometheus
name, which ``generate_latest`` writes unquoted.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.utils import floatToGoString

__all__ = ["Forms", "escape", "forms", "header", "number", "prefix"]

_BELOW = float("-inf")
_GO_EXPONENT = 1e6
"""From here up, Go (and so floatToGoString) writes an exponent where Python's ``repr`` does
not; below it, and down to -inf excluded, the two agree."""

Forms = tuple[str, str]
"""A sample line's text before and after one label's value (the ``hole``), value excluded:
``before + escape(value) + after + number + "\\n"``."""


def escape(value: str) -> str:
    """A label value as the text format quotes it."""
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def number(value: float) -> str:
    """``floatToGoString(value)``, without its calls for the usual values."""
    if _BELOW < value < _GO_EXPONENT:
        return repr(value)
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


def header(name: str, documentation: str, kind: str) -> str:
    """The ``# HELP`` and ``# TYPE`` lines of a family (``name`` as written: with ``_total``
    for a counter)."""
    text = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {text}\n# TYPE {name} {kind}\n"


def prefix(name: str, labels: Mapping[str, str]) -> str:
    """A sample line up to its number: ``name{labels} `` (``name `` without labels)."""
    if not labels:
        return f"{name} "
    return f"{name}{{{_labels(labels, sorted(labels))}}} "


def forms(name: str, labels: Mapping[str, str], hole: str) -> Forms:
    """:data:`Forms` of a sample of ``name`` with ``labels``, around the value of ``hole``
    (one of ``labels``, whose value there is ignored)."""
    names = sorted(labels)
    at = names.index(hole)
    before, after = _labels(labels, names[:at]), _labels(labels, names[at + 1 :])
    return (
        f'{name}{{{before}{"," if before else ""}{hole}="',
        f'"{"," if after else ""}{after}}} ',
    )


def _labels(labels: Mapping[str, str], names: list[str]) -> str:
    return ",".join(f'{label}="{escape(labels[label])}"' for label in names)
