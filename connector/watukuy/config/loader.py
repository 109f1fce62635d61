"""``load_config(path)`` and ``parse_config(mapping)``: the runner config, validated."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from watukuy.config.credentials import parse_credentials
from watukuy.config.model import RunnerConfig
from watukuy.config.pollers import (
    entry_indexes,
    load_pollers,
    parse_python_path,
    prepend_sys_path,
)
from watukuy.config.sections import (
    check_kafka_clients,
    parse_budgets,
    parse_kafka,
    parse_log,
    parse_metrics,
    parse_rest,
    parse_runner,
    parse_schema_registry,
    parse_topics,
)
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Poller
from watukuy.core.validation import check_keys, kind, message_of, section
from watukuy.options.secrets import Secrets, resolve_references

TOP_LEVEL_KEYS = (
    "kafka",
    "topics",
    "runner",
    "rest",
    "budgets",
    "schema.registry",
    "log",
    "metrics",
    "credentials",
    "pollers",
    "python_path",
)


def load_config(path: str | os.PathLike[str]) -> RunnerConfig:
    """Read the YAML file at ``path``, resolve its secrets, validate it, import its pollers."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file '{file}' not found", "--config") from None
    except IsADirectoryError:
        raise ConfigError(f"config file '{file}' is a directory", "--config") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file '{file}': {exc.strerror}", "--config") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file '{file}' is not UTF-8 text", "--config") from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(f"invalid YAML{where}: {problem}", str(file)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {' '.join(str(exc).split())}", str(file)) from None
    if data is None:
        raise ConfigError("the config file is empty; expected kafka, runner and pollers", str(file))
    if not isinstance(data, Mapping):
        raise ConfigError(f"the top level must be a mapping of keys, got {kind(data)}", str(file))
    return parse_config(data, base_dir=file.absolute().parent)


def parse_config(
    mapping: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None
) -> RunnerConfig:
    """``load_config`` from an already-parsed mapping; relative paths resolve against ``base_dir``
    (the current directory when ``None``)."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"the config must be a mapping of keys, got {kind(mapping)}")
    given = section(mapping, "")
    check_keys(given, TOP_LEVEL_KEYS, "")
    base = Path.cwd() if base_dir is None else Path(base_dir)
    data, secrets = resolve_references(given, base)
    try:
        built = _build(data, base, secrets)
    except ConfigError as exc:
        if not secrets.values:
            raise
        cause = exc.__cause__
        if cause is not None and secrets.scrub(str(cause)) != str(cause):
            cause = None
        raise ConfigError(secrets.scrub(message_of(exc)), exc.path) from cause
    # What REST shows of a config-file poller: as written, ``${...}`` never resolved.
    written = given.get("pollers")
    if not isinstance(written, list):
        return replace(built, written_pollers=())
    # One per poller, as ``poller_refs``: each stream of a connector shows its connector's entry.
    indexes = entry_indexes(built.poller_refs)
    return replace(built, written_pollers=tuple(written[index] for index in indexes))


def _build(data: Mapping[str, Any], base_dir: Path, secrets: Secrets) -> RunnerConfig:
    python_path = parse_python_path(data.get("python_path"), base_dir, secrets)
    kafka = parse_kafka(data.get("kafka"), secrets)
    topics = parse_topics(data.get("topics"), secrets)
    runner = parse_runner(data.get("runner"), topics.prefix, secrets)
    check_kafka_clients(kafka, runner, secrets)
    rest = parse_rest(data.get("rest"), secrets, base_dir)
    budgets = parse_budgets(data.get("budgets"), secrets)
    schema_registry = parse_schema_registry(data.get("schema.registry"), secrets)
    log = parse_log(data.get("log"), secrets)
    metrics = parse_metrics(data.get("metrics"))
    credentials = parse_credentials(data.get("credentials"), secrets)
    prepend_sys_path(python_path)
    pollers, refs = load_pollers(data.get("pollers"), secrets, base_dir)
    _check_budget_names(pollers, entry_indexes(refs), budgets)
    if credentials is None:
        _check_no_rotating_grant(data.get("pollers"))
    return RunnerConfig(
        kafka=kafka,
        topics=topics,
        runner=runner,
        rest=rest,
        budgets=budgets,
        schema_registry=schema_registry,
        log=log,
        metrics=metrics,
        credentials=credentials,
        pollers=pollers,
        poller_refs=refs,
        python_path=python_path,
        secrets=frozenset(secrets.paths),
        base_dir=base_dir,
    )


def _check_no_rotating_grant(entries: object) -> None:
    """A poller keeping tenants' refresh tokens needs a credential store: without one, a
    rotated grant would live in memory only and be lost at the next restart (and the spent
    first grant, which the tenants source still hands in, would then revoke the tenant)."""
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        where = _rotating_grant(entry, f"pollers[{index}]")
        if where is not None:
            raise ConfigError(
                "grant: refresh_token keeps each tenant's rotated grants in a credential store: "
                "set credentials (store: kafka and key, or store: http)",
                where,
            )


def _rotating_grant(node: object, at: str) -> str | None:
    """The path of an ``oauth2`` mapping with ``grant: refresh_token`` under ``node``."""
    if isinstance(node, Mapping):
        if node.get("grant") == "refresh_token" and at.endswith(".oauth2"):
            return f"{at}.grant"
        children = ((f"{at}.{key}", value) for key, value in node.items())
    elif isinstance(node, list):
        children = ((f"{at}[{i}]", value) for i, value in enumerate(node))
    else:
        return None
    for path, value in children:
        found = _rotating_grant(value, path)
        if found is not None:
            return found
    return None


def _check_budget_names(
    pollers: list[Poller], entries: list[int], budgets: Mapping[str, Any]
) -> None:
    for index, poller in zip(entries, pollers, strict=True):
        for name in poller.budgets:
            if name in budgets:
                continue
            defined = f"defined: {', '.join(sorted(budgets))}" if budgets else "none are defined"
            raise ConfigError(
                f"poller {poller.name!r} uses budget {name!r}, which is not under budgets "
                f"({defined})",
                f"pollers[{index}]",
            )
