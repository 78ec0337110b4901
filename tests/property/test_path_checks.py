"""The whole-column path pre-check equals the per-path one on any list of texts (and is
False for anything else in the list)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from radharmony.table.paths import all_plainly_clean, plainly_clean

PROFILE = settings.get_profile("radharmony-property")
#: texts made of the characters every rule of plainly_clean looks at
PATH = st.text(alphabet="ab/. :\\\x00\n", max_size=8)


@PROFILE
@given(st.lists(PATH, max_size=6))
@example(["a/b", "c:/d"]).via("a drive letter")
@example(["a/b", ".x"]).via("a leading dot that plainly_clean accepts")
@example(["a/b", ""]).via("an empty path")
@example(["a/b", "a//b"]).via("an empty part")
def test_whole_column_check_equals_the_per_path_check(paths):
    assert all_plainly_clean(paths) == all(map(plainly_clean, paths))


@PROFILE
@given(st.lists(st.one_of(PATH, st.none(), st.integers()), min_size=1, max_size=6))
def test_anything_but_text_is_not_plainly_clean(values):
    if not all(isinstance(v, str) for v in values):
        assert all_plainly_clean(values) is False
