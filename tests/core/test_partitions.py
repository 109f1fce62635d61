from __future__ import annotations

from typing import Any

import pytest

from watukuy.core.errors import ConfigError
from watukuy.core.partitions import SINGLE, PartitionsDiff, diff, normalise
from watukuy.core.poller import Partition

pytestmark = pytest.mark.unit


def test_partitions_and_dicts_accepted_in_order() -> None:
    tenant = {"slug": "acme", "token": "t0k"}
    result = normalise(
        "invoices",
        [
            {"key": "t_3", "data": tenant},
            Partition("t_1", {"slug": "b"}),
            {"key": "t_2"},
        ],
    )
    assert list(result) == ["t_3", "t_1", "t_2"]
    assert result["t_3"] == Partition("t_3", tenant)
    assert result["t_3"].data is tenant
    assert result["t_1"].data == {"slug": "b"}
    assert result["t_2"].data is None


def test_any_iterable_of_entries_is_accepted() -> None:
    result = normalise("p", (Partition(k) for k in ["b", "a"]))
    assert list(result) == ["b", "a"]


def test_empty_list_is_no_partitions() -> None:
    assert normalise("p", []) == {}


@pytest.mark.parametrize(
    ("entries", "path"),
    [
        ([{"key": ""}], "partitions[0].key"),
        ([Partition("a"), Partition("")], "partitions[1].key"),
        ([{"key": 42}], "partitions[0].key"),
        ([{"data": {"x": 1}}], "partitions[0].key"),
        ([Partition(7)], "partitions[0].key"),  # type: ignore[arg-type]
        ([{"key": "a"}, {"key": "b"}, {"key": "a"}], "partitions[2].key"),
        ([{"key": "a"}, Partition("a")], "partitions[1].key"),
        (["t_1"], "partitions[0]"),
        ([("t_1", None)], "partitions[0]"),
    ],
)
def test_bad_entries(entries: list[Any], path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        normalise("invoices", entries)
    assert raised.value.path == path
    assert "invoices" in str(raised.value)


def test_duplicate_key_names_the_key() -> None:
    with pytest.raises(ConfigError, match="duplicate partition key 't_9'"):
        normalise("invoices", [{"key": "t_9"}, {"key": "t_9"}])


@pytest.mark.parametrize("returned", ["t_1", b"t_1", {"key": "t_1", "data": None}, None, 5])
def test_not_a_list(returned: object) -> None:
    with pytest.raises(ConfigError, match="must return a list of partitions"):
        normalise("invoices", returned)


def test_repr_hides_data() -> None:
    partition = Partition("k", {"token": "secret"})
    assert "secret" not in repr(partition)
    assert "secret" not in str(partition)
    assert "secret" not in repr([partition])
    assert "'k'" in repr(partition)


def test_single_partition_key_is_empty() -> None:
    assert SINGLE.key == ""
    assert SINGLE.data is None


def test_diff() -> None:
    result = diff(["a", "b", "c"], ["c", "d", "a", "e"])
    assert result == PartitionsDiff(added=("d", "e"), removed=("b",), kept=("c", "a"))


def test_diff_of_same_lists_keeps_all() -> None:
    assert diff(["a", "b"], ["a", "b"]) == PartitionsDiff(added=(), removed=(), kept=("a", "b"))


def test_diff_from_and_to_nothing() -> None:
    assert diff([], ["a"]) == PartitionsDiff(added=("a",), removed=(), kept=())
    assert diff(["a"], []) == PartitionsDiff(added=(), removed=("a",), kept=())


def test_diff_accepts_dict_keys() -> None:
    before = normalise("p", [{"key": "x"}, {"key": "y"}])
    after = normalise("p", [{"key": "y"}, {"key": "z"}])
    assert diff(before, after) == PartitionsDiff(added=("z",), removed=("x",), kept=("y",))
