"""The held keys' figures: whatever keys come, change and leave, the table shows them in key
order and its sums per poller are those of the keys it holds, as if added up afresh."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.clock import FakeClock
from watukuy.core.figures import CIRCUIT_STATES, FigureTable, KeyFigures, parked_counts

pytestmark = pytest.mark.unit

POLLERS = ("a", "a.b", "b")  # "a.b/x" sorts before "a/x" as text, after it as (poller, key)
PARTITIONS = ("", "x", "x/y", "y", "Z")

Key = tuple[str, str]


def _figures(key: Key, fields: dict[str, Any]) -> tuple[Any, ...]:
    poller, partition = key
    return (
        f"{poller}/{partition}",
        poller,
        partition,
        fields["success"],
        fields["circuit"],
        parked_counts(fields["parked"]),
        fields["waiting"],
    )


successes = st.none() | st.sampled_from([0.0, 10.0, 10.0, 25.5, 40.0])
fields = st.fixed_dictionaries(
    {
        "success": successes,
        "circuit": st.sampled_from(CIRCUIT_STATES),
        "parked": st.lists(st.sampled_from(["invalid", "poison"]), max_size=3),
        "waiting": st.booleans(),
    }
)
keys = st.tuples(st.sampled_from(POLLERS), st.sampled_from(PARTITIONS))
steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, fields),
        st.tuples(st.just("poll"), keys, st.fixed_dictionaries({"success": successes})),
        st.tuples(st.just("drop"), keys, st.just({})),
        st.tuples(st.just("look"), st.just(("", "")), st.just({})),
    ),
    max_size=60,
)


def _check(table: FigureTable, held: dict[Key, dict[str, Any]]) -> None:
    shown = [(row.poller, row.partition) for row in table.rows()]
    assert shown == sorted(held)
    for row in table.rows():
        assert _figures((row.poller, row.partition), _fields(row)) == _figures(
            (row.poller, row.partition), held[row.poller, row.partition]
        )
    assert set(table.pollers()) == {poller for poller, _ in held}
    for poller, sums in table.pollers().items():
        mine = [f for (p, _), f in held.items() if p == poller]
        run = [f for f in mine if not f["waiting"]]
        assert (sums.held, sums.waiting) == (len(run), len(mine) - len(run))
        assert sums.circuits == {s: sum(f["circuit"] == s for f in run) for s in CIRCUIT_STATES}
        parked = {"invalid": 0, "poison": 0}
        for f in run:
            for kind in f["parked"]:
                parked[kind] += 1
        assert sums.parked == parked
        successes = [f["success"] for f in run if f["success"] is not None]
        assert table.oldest_success(poller) == (min(successes) if successes else None)


def _fields(row: KeyFigures) -> dict[str, Any]:
    kinds = [kind for kind, count in row.parked for _ in range(count)]
    return {
        "success": row.last_success,
        "circuit": row.circuit,
        "parked": kinds,
        "waiting": row.waiting,
    }


@settings(max_examples=300)
@given(steps, st.booleans())
def test_the_table_holds_what_was_put_in_key_order_and_adds_it_up(
    changes: list[tuple[str, Key, dict[str, Any]]], early: bool
) -> None:
    """``early``: the order and the oldest success are read from the start (kept from then
    on as keys change), or only at each look."""
    table = FigureTable(FakeClock(100.0))
    held: dict[Key, dict[str, Any]] = {}
    if early:
        _check(table, held)
    for what, key, given_fields in changes:
        if what == "poll" and key in held:  # a poll: only the last success moves
            given_fields = {**held[key], **given_fields}
        if what in ("put", "poll") and (what == "put" or key in held):
            table.put(*_figures(key, given_fields))
            held[key] = given_fields
        elif what == "drop":
            table.drop(f"{key[0]}/{key[1]}")
            held.pop(key, None)
        if early or what == "look":
            _check(table, held)
    _check(table, held)


def test_a_keys_shape_moves_with_what_its_lines_show_and_not_with_its_last_success() -> None:
    table = FigureTable(FakeClock(100.0))
    table.put("a/x", "a", "x", None, "closed", parked_counts(()), False)
    (row,) = table.rows()
    shapes = (row.shape, table.shapes)
    table.put("a/x", "a", "x", 50.0, "closed", parked_counts(()), False)  # its first success
    assert (row.shape, table.shapes) == (shapes[0] + 1, shapes[1] + 1)
    table.put("a/x", "a", "x", 80.0, "closed", parked_counts(()), False)  # a poll
    assert (row.shape, table.shapes) == (shapes[0] + 1, shapes[1] + 1)
    table.put("a/x", "a", "x", 80.0, "open", parked_counts(()), False)
    assert (row.shape, table.shapes) == (shapes[0] + 2, shapes[1] + 2)
    members = table.members
    table.drop("a/x")
    assert table.members == members + 1
