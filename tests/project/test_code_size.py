"""Sizes a reader can hold in mind (issue 21): no module in ``connector/`` over 500 lines, no
function over 60 (from its ``def`` to its last line), no class over 25 public methods.

Each test lists every offender, not only the first, so one run shows the whole debt.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

CONNECTOR = Path(__file__).resolve().parents[2] / "connector"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_PUBLIC_METHODS = 25


def _modules() -> Iterator[tuple[str, str]]:
    for path in sorted(CONNECTOR.rglob("*.py")):
        yield str(path.relative_to(CONNECTOR)), path.read_text(encoding="utf-8")


def _nodes() -> Iterator[tuple[str, ast.AST]]:
    for name, source in _modules():
        for node in ast.walk(ast.parse(source, filename=name)):
            yield name, node


def test_no_module_is_over_500_lines() -> None:
    offenders = [
        f"{name}: {lines} lines"
        for name, source in _modules()
        if (lines := len(source.splitlines())) > MAX_MODULE_LINES
    ]
    assert not offenders, "\n".join(offenders)


def test_no_function_is_over_60_lines() -> None:
    offenders = [
        f"{name}:{node.lineno} {node.name}: {lines} lines"
        for name, node in _nodes()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    ]
    assert not offenders, "\n".join(offenders)


def test_no_class_has_over_25_public_methods() -> None:
    offenders = [
        f"{name}:{node.lineno} {node.name}: {count} public methods"
        for name, node in _nodes()
        if isinstance(node, ast.ClassDef) and (count := _public_methods(node)) > MAX_PUBLIC_METHODS
    ]
    assert not offenders, "\n".join(offenders)


def _public_methods(node: ast.ClassDef) -> int:
    return sum(
        1
        for member in node.body
        if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
        and not member.name.startswith("_")
    )
