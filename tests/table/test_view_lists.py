"""A question's list of view names mapped to canonical views, each distinct list once."""

from __future__ import annotations

from radharmony.table.schema import canonical_views, view_lists

VIEW_MAP = {"POSTERO_ANTERIOR": "PA", "LATERAL": "LATERAL", "AP": "AP"}


def test_each_row_is_mapped_as_canonical_views_maps_it_and_owns_its_list():
    rows = [["POSTERO_ANTERIOR", "lateral "], None, [], ["POSTERO_ANTERIOR", "lateral "],
            ("AP", "odd", ""), ["POSTERO_ANTERIOR", "lateral "]]
    out = view_lists(rows, VIEW_MAP)
    assert out == [canonical_views(list(r), VIEW_MAP).tolist() if r else [] for r in rows]
    assert out[0] == ["PA", "LATERAL"] and out[4] == ["AP", "odd", None] and out[1] == []
    assert out[0] is not out[3] and out[3] is not out[5]  # rows never share a list
    out[0].append("X")
    assert out[3] == ["PA", "LATERAL"]


def test_shared_lists_are_one_object_per_distinct_list():
    out = view_lists([["AP"], ["AP"], ["LATERAL"]], VIEW_MAP, shared=True)
    assert out == [["AP"], ["AP"], ["LATERAL"]] and out[0] is out[1]
