"""``pollers: [{python: module:attr}]`` and ``python_path``: importing the user's pollers."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from watukuy.config.checks import check_keys, kind
from watukuy.config.references import Secrets
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Poller

_DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
_REFERENCE = re.compile(rf"^({_DOTTED}):({_DOTTED})$")
DECLARATIVE_UNSUPPORTED = "declarative pollers are not supported yet; use python: module:attr"


def parse_python_path(raw: object, base_dir: Path, secrets: Secrets) -> tuple[Path, ...]:
    """Directories (relative to the config file) to put in front of ``sys.path``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"must be a list of directories, got {kind(raw)}", "python_path")
    out: list[Path] = []
    for index, entry in enumerate(raw):
        where = f"python_path[{index}]"
        if not isinstance(entry, str) or not entry.strip():
            raise ConfigError(f"must be a directory path, got {kind(entry)}", where)
        directory = Path(entry).expanduser()
        if not directory.is_absolute():
            directory = base_dir / directory
        if not directory.is_dir():
            shown = "[redacted]" if secrets.covers(where) else f"'{directory}'"
            raise ConfigError(f"directory {shown} does not exist", where)
        out.append(directory.resolve())
    return tuple(out)


def prepend_sys_path(directories: Sequence[Path]) -> None:
    """Put ``directories`` first on ``sys.path``, in their order, each once."""
    for directory in reversed(directories):
        entry = str(directory)
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if directories:
        importlib.invalidate_caches()


def load_pollers(raw: object, secrets: Secrets) -> tuple[list[Poller], tuple[str, ...]]:
    """The pollers and the ``module:attr`` each came from; names must be unique."""
    if raw is None or raw == []:
        raise ConfigError(
            "at least one poller is required, e.g. '- python: module:attr'", "pollers"
        )
    if not isinstance(raw, list):
        raise ConfigError(f"must be a list of pollers, got {kind(raw)}", "pollers")
    pollers: list[Poller] = []
    refs: list[str] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(raw):
        where = f"pollers[{index}]"
        ref = _entry_reference(entry, where, secrets)
        poller = import_poller(ref, f"{where}.python")
        if poller.name in seen:
            raise ConfigError(
                f"duplicate poller name {poller.name!r} (also pollers[{seen[poller.name]}])", where
            )
        seen[poller.name] = index
        pollers.append(poller)
        refs.append(ref)
    return pollers, tuple(refs)


def _entry_reference(entry: object, where: str, secrets: Secrets) -> str:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"must be a mapping like 'python: module:attr', got {kind(entry)}", where)
    if "name" in entry:
        raise ConfigError(DECLARATIVE_UNSUPPORTED, where)
    if "python" not in entry:
        raise ConfigError("needs 'python: module:attr' naming a Poller", where)
    check_keys(entry, ("python",), where)
    ref = entry["python"]
    path = f"{where}.python"
    if not isinstance(ref, str) or not _REFERENCE.match(ref.strip()):
        shown = secrets.show(ref, path) if isinstance(ref, str) else kind(ref)
        raise ConfigError(
            f"expected 'module:attribute', e.g. 'mypackage.pollers:invoices', got {shown}", path
        )
    return ref.strip()


def import_poller(ref: str, path: str) -> Poller:
    """The ``Poller`` at ``module:attr``; every failure is one line naming what went wrong."""
    module_name, _, attribute = ref.partition(":")
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
    if not isinstance(obj, Poller):
        raise ConfigError(
            f"{ref!r} is {kind(obj)}, not a Poller; create it with watukuy.define_poller(...)",
            path,
        )
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
