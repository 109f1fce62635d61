"""``module:attr`` references: a Python poller (``python: module:attr``) and a Python partition
source (``partitions.python``) are both imported by :func:`import_object`, so its one-line
errors read the same wherever a reference is written."""

from __future__ import annotations

import importlib
import re
from typing import Any

from watukuy.core.errors import ConfigError

__all__ = ["REFERENCE", "import_object"]

_DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
REFERENCE = re.compile(rf"^({_DOTTED}):({_DOTTED})$")
"""``module:attr``, both dotted Python names."""


def import_object(ref: str, path: str) -> Any:
    """The object at ``module:attr`` (``attr`` may be dotted); failures are one line."""
    if not REFERENCE.match(ref.strip()):
        raise ConfigError(
            f"expected 'module:attribute', e.g. 'mypackage.tenants:load', got {ref!r}", path
        )
    module_name, _, attribute = ref.strip().partition(":")
    obj: Any = _import_module(module_name, path)
    walked: list[str] = []
    for part in attribute.split("."):
        owner = f"{module_name}:{'.'.join(walked)}" if walked else f"module {module_name!r}"
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = owner if not walked else repr(owner)
            raise ConfigError(f"{where} has no attribute {part!r}", path) from None
        except Exception as exc:
            raise ConfigError(f"reading {ref!r} failed: {_one_line(exc)}", path) from exc
        walked.append(part)
    return obj


def _import_module(name: str, path: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == name or name.startswith(f"{missing}."):
            raise ConfigError(
                f"module {name!r} not found; is it installed or on python_path?", path
            ) from None
        raise ConfigError(f"importing {name!r} failed: {_one_line(exc)}", path) from exc
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"importing {name!r} failed: {_one_line(exc)}", path) from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
