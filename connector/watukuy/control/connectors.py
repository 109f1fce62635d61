"""Connectors as REST sees them: their configs (listed, read, created, replaced, patched,
deleted, validated) and their targets, all written to ``<prefix>.configs``.

A connector from the runner's config file is listed and read, and its target may be set, but
its config lives in the file: REST cannot change it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from watukuy.config.pollers import PollerSource, import_poller
from watukuy.control.configs import ConfigTopic, UnknownConnector
from watukuy.control.streams import Named, stream_names
from watukuy.control.transformrecords import (
    changed_transforms,
    fingerprint_of,
    transform_warning,
)
from watukuy.core.errors import ConfigError, Conflict
from watukuy.core.lifecycle import Target
from watukuy.core.poller import Poller
from watukuy.core.validation import message_of
from watukuy.declarative import compile_connector_entry
from watukuy.options.secrets import Secrets, resolve_references
from watukuy.rest.errors import NotFound
from watukuy.rest.port import (
    PLUGINS,
    Config,
    ConnectorRecord,
    ConnectorRef,
    Validated,
    merge_patch,
    relative_path,
)

__all__ = ["ConnectorConfigs", "compile_connector"]

WHERE = "config"
"""Where a REST connector's config sits: its errors are named relative to it."""


def compile_connector(name: str, config: Mapping[str, Any], base_dir: Path) -> list[Poller]:
    """The pollers a REST connector's ``config`` (``${...}`` unresolved) describes: one, or one
    per stream of a config with ``streams``; a ``ConfigError`` names the field relative to the
    config (``request.url``, ``streams[1].request.path``)."""
    secrets: Secrets | None = None
    try:
        resolved, secrets = resolve_references({WHERE: dict(config)}, base_dir)
        body = {key: value for key, value in resolved[WHERE].items() if key != "name"}
        return compile_connector_entry(
            {**body, "name": name}, where=WHERE, base_dir=base_dir, written=secrets.written
        )
    except ConfigError as exc:
        # A validator quotes the value it refused: a resolved ${env:...} one must not reach
        # the REST answer (the file loader scrubs its errors the same way).
        message = message_of(exc) if secrets is None else secrets.scrub(message_of(exc))
        raise ConfigError(message, relative_path(exc.path, WHERE) or None) from None


class ConnectorConfigs:
    """The connectors of the config file and of ``<prefix>.configs``, and their targets."""

    def __init__(
        self, configs: ConfigTopic, file_pollers: Mapping[str, PollerSource], base_dir: Path
    ) -> None:
        self._configs = configs
        self._file = dict(file_pollers)
        self._base_dir = base_dir

    # -- configs ----------------------------------------------------------------------------

    async def connectors(self) -> list[ConnectorRef]:
        refs = [ConnectorRef(name, "config-file") for name in self._file]
        refs += [
            ConnectorRef(name, "rest")
            for name, (config, _) in self._configs.view().items()
            if config is not None and name not in self._file
        ]
        return sorted(refs, key=lambda ref: ref.name)

    async def connector(self, name: str) -> ConnectorRecord:
        found = self._record(name)
        if found is None:
            named = self.named(name)  # a stream's name: say whose it is
            raise NotFound(
                f"connector {name} not found: it is stream {named.stream} of connector "
                f"{named.connector}, configured as a whole at /connectors/{named.connector}"
            )
        return found

    def _record(self, name: str) -> ConnectorRecord | None:
        if name in self._file:
            return ConnectorRecord(name, "config-file", _as_written(self._file[name]))
        found = self._configs.get(name)
        if found is None or found.config is None:
            return None
        return ConnectorRecord(name, "rest", dict(found.config))

    # -- names --------------------------------------------------------------------------------

    def named(self, name: str) -> Named:
        """What ``name`` stands for: a connector, or ``<connector>.<stream>``; ``NotFound``
        for anything else. A connector's own name wins over a stream's of the same text."""
        found = self._record(name)
        if found is not None:
            return Named(name, None, stream_names(found.config))
        for index, char in enumerate(name):
            if char != ".":
                continue
            owner = self._record(name[:index])
            streams = () if owner is None else stream_names(owner.config)
            if name[index + 1 :] in streams:
                return Named(name[:index], name[index + 1 :], streams)
        raise NotFound(f"connector {name} not found")

    def poller(self, name: str) -> str:
        """The poller whose keys a per-key route names: the connector, or one stream of it.
        ``NotFound`` for a connector with streams, whose keys are each stream's."""
        named = self.named(name)
        if named.grouped:
            raise NotFound(
                f"connector {name} has streams ({', '.join(named.streams)}), each with keys "
                f"of its own: name one, as {name}.{named.streams[0]}"
            )
        return named.pollers[0]

    async def create_connector(self, name: str, config: Config, initial_state: Target) -> None:
        self._writable(name)
        if self._rest_config(name) is not None:
            raise Conflict(f"connector {name} already exists")
        self._compiled(name, config)
        await self._configs.put(name, _stored(config), initial_state, expected_version=0)

    async def put_connector_config(self, name: str, config: Config) -> bool:
        self._writable(name)
        self._compiled(name, config)
        found = self._configs.get(name)
        created = found is None or found.config is None
        target = Target.RUNNING if created or found is None else found.target
        version = 0 if found is None else found.version
        await self._configs.put(name, _stored(config), target, expected_version=version)
        return created

    async def patch_connector_config(self, name: str, patch: Config) -> None:
        self._writable(name)
        found = self._configs.get(name)
        if found is None or found.config is None:
            raise NotFound(f"connector {name} not found")
        merged = merge_patch(found.config, patch)
        self._compiled(name, merged)
        await self._configs.put(name, _stored(merged), found.target, expected_version=found.version)

    async def delete_connector(self, name: str) -> None:
        self._writable(name)
        found = self._configs.get(name)
        if found is None or found.config is None:
            raise NotFound(f"connector {name} not found")
        await self._configs.delete(name, expected_version=found.version)

    async def validate(
        self, plugin: str, config: Config, recorded: Mapping[str, str | None]
    ) -> Validated:
        """The first error; for a valid ``config``, a warning per poller of it whose
        transform is not the one ``recorded`` as last published with
        (:mod:`.transformrecords`)."""
        try:
            pollers = self._validated(plugin, config)
        except ConfigError as exc:
            return Validated(exc)
        fingerprints = {poller.name: fingerprint_of(poller) for poller in pollers}
        return Validated(
            warnings=tuple(
                transform_warning(name, removed=fingerprints[name] is None)
                for name in changed_transforms(pollers, recorded)
            )
        )

    def _validated(self, plugin: str, config: Config) -> list[Poller]:
        if plugin not in PLUGINS:
            raise NotFound(f"connector plugin {plugin} not found")
        if plugin == "http":
            return compile_connector(str(config.get("name", "validate")), config, self._base_dir)
        ref = config.get("python")
        if not isinstance(ref, str):
            raise ConfigError("needs 'python: module:attr' naming a Poller", "python")
        return [import_poller(ref, "python")]

    # -- targets ----------------------------------------------------------------------------

    def target(self, name: str) -> Target:
        """The connector's target (a stream's is its connector's); ``NotFound`` when there is
        no such connector."""
        connector = self.named(name).connector
        found = self._configs.get(connector)
        return Target.RUNNING if found is None else found.target

    def require_stopped(self, name: str) -> None:
        """``Conflict`` unless the connector is STOPPED (only then may its offsets change)."""
        if self.target(name) != Target.STOPPED:
            connector = self.named(name).connector
            raise Conflict(
                f"connector {connector} must be STOPPED to change its offsets: "
                f"PUT /connectors/{connector}/stop first"
            )

    async def set_target(self, name: str, target: Target) -> None:
        named = self.named(name)
        if named.stream is not None:
            # A target is the connector's: its streams run, pause and stop together.
            raise Conflict(
                f"{name} is stream {named.stream} of connector {named.connector}, whose "
                f"streams share one target: PUT /connectors/{named.connector}/... instead"
            )
        if name in self._file:
            await self._configs.put_target(name, target)
            return
        try:
            await self._configs.set_target(name, target)
        except UnknownConnector as exc:
            raise NotFound(f"connector {name} not found") from exc

    def _compiled(self, name: str, config: Mapping[str, Any]) -> None:
        """Refuse a config that does not compile, or whose streams' pollers would take the name
        of a config-file poller (``<name>.<stream>`` is a poller name like any other)."""
        for poller in compile_connector(name, config, self._base_dir):
            if poller.name != name and poller.name in self._file:
                raise Conflict(
                    f"stream poller {poller.name} of connector {name} has the name of a poller "
                    "of the runner's config file"
                )

    def _writable(self, name: str) -> None:
        if name in self._file:
            raise Conflict(
                f"connector {name} comes from the runner's config file: it can be paused, "
                "resumed, stopped and operated over REST, but not reconfigured (edit the file)"
            )
        if self._record(name) is None:
            try:
                named = self.named(name)
            except NotFound:
                return
            # Its poller would take the name of the stream's poller.
            raise Conflict(
                f"{name} is stream {named.stream} of connector {named.connector}: "
                "a connector cannot take its name"
            )

    def _rest_config(self, name: str) -> Mapping[str, Any] | None:
        found = self._configs.get(name)
        return None if found is None else found.config


def _as_written(source: PollerSource) -> Config:
    if isinstance(source, str):
        return {"python": source}
    return {key: value for key, value in source.items() if key != "name"}


def _stored(config: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key != "name"}
