"""The picture a key's pages in flight leave: the committed snapshot with their changes over
it reads exactly as the commit rule applied to a copy would, while pages land in between."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.state import SnapshotEntry
from watukuy.engine.inflight import Overlay

names = st.sampled_from([f"item-{n}" for n in range(6)])
entries = st.builds(SnapshotEntry, version=st.sampled_from(["v1", "v2", "v3"]), seen=st.just(1.0))
pages = st.lists(
    st.tuples(st.dictionaries(names, entries, max_size=3), st.lists(names, max_size=2)),
    min_size=1,
    max_size=6,
)


def applied(picture: dict[str, SnapshotEntry], page: tuple[dict, list]) -> None:
    upserts, forget = page
    picture.update(upserts)  # the commit rule: upserts, then removals
    for name in forget:
        picture.pop(name, None)


@given(st.dictionaries(names, entries, max_size=6), pages, st.integers(0, 6))
def test_an_overlay_reads_as_the_pages_applied_to_a_copy(
    committed: dict[str, SnapshotEntry], sent: list[tuple[dict, list]], landed: int
) -> None:
    expected = dict(committed)
    overlay: Overlay[SnapshotEntry] = Overlay(committed)
    for serial, page in enumerate(sent, 1):
        applied(expected, page)
        overlay.change(*page, serial)
    for serial, page in enumerate(sent[:landed], 1):  # pages land: the committed picture
        applied(committed, page)  # moves on under the overlay, which lets their changes go
        overlay.landed([*page[0], *page[1]], serial)

    assert dict(overlay) == expected
    assert len(overlay) == len(expected)
    assert sorted(overlay) == sorted(expected)
    for name in [f"item-{n}" for n in range(6)]:
        assert (name in overlay) == (name in expected)
        assert overlay.get(name) == expected.get(name)
    # Only what the pages still in flight change is kept: a backlog whose pages never all
    # land at once does not grow its overlay without end.
    in_flight = {name for upserts, forget in sent[landed:] for name in (*upserts, *forget)}
    assert overlay.pending == len(in_flight)
