"""A budget's ``rate`` written as a template over the tenant's data (a tenant's plan).

``budgets: {vendor: {rate: "{partition.data.rate_limit}/m", per: tenant}}``: each tenant's
bucket refills at what its own data says. The template is compiled as request templates are
(:mod:`watukuy.declarative.templates`), and may name ``{partition.data.NAME}`` only: a
budget belongs to no request, cursor or child key. A single placeholder keeps the value's
type (``rate_limit: 5`` is five a second, ``"300/m"`` is read as a rate).

The runner config keeps the budgets as written (they are printed by ``describe``); the engine
gets them from :func:`engine_budgets`, templates turned into
:class:`~watukuy.core.tenant_budget.TenantRate`. A rate given through a ``${...}`` secret is
taken as it is, never read for placeholders.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Collection, Mapping
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition
from watukuy.core.tenant_budget import TenantRate
from watukuy.declarative.templates import Scope, Template, compile_template

__all__ = ["engine_budgets", "tenant_rate"]

_DATA = "partition.data."
_SHOWN = ("partition", "tenant", "cursor", "parent", "fanout")


def tenant_rate(text: object, where: str) -> TenantRate | None:
    """The rate template of ``text``; ``None`` when it names nothing (a fixed rate)."""
    if not isinstance(text, str) or "{" not in text:
        return None
    _only_data(text, where)
    template = compile_template(text, where, partitioned=True, cursor=False)
    if template.is_constant:  # only {{ }}: literal braces, which parse_rate refuses
        return None
    return TenantRate(_render(template), template.shown)


def engine_budgets(
    given: Mapping[str, Mapping[str, Any]], secret_paths: Collection[str] = ()
) -> dict[str, dict[str, Any]]:
    """The budgets as the engine takes them: each rate template a ``TenantRate``.

    ``secret_paths``: the config paths whose values came from secrets (used as they are).
    """
    out: dict[str, dict[str, Any]] = {}
    for name, spec in given.items():
        spec = dict(spec)
        where = f"budgets.{name}.rate"
        if not any(where == p or where.startswith(f"{p}.") for p in secret_paths):
            rate = tenant_rate(spec.get("rate"), where)
            if rate is not None:
                spec["rate"] = rate
        out[name] = spec
    return out


def _only_data(text: str, where: str) -> None:
    """A ``ConfigError`` for the first placeholder that is not ``{partition.data.NAME}``."""
    try:
        pieces = list(string.Formatter().parse(text))
    except ValueError:
        return  # compile_template says what is wrong with the braces
    for _, name, _, _ in pieces:
        if name is None or name.strip().startswith(_DATA):
            continue
        shown = f"{{{name}}}" if name.strip().startswith(_SHOWN) else "a placeholder"
        raise ConfigError(
            f"a rate may name only {{partition.data.NAME}} (the tenant's plan), not {shown}; "
            "write {{ and }} for literal braces",
            where,
        )


def _render(template: Template) -> Callable[[Partition], object]:
    def rate_of(partition: Partition) -> object:
        return template.value(Scope(partition))

    return rate_of
