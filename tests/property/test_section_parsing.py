"""Report section parsing on any text: spans in order inside the text, each span's text its
section's, and never an exception."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from radharmony.reports.sections import HEADERS, section_name, section_spans, split_sections

PROFILE = settings.get_profile("radharmony-property")

HEADER = st.sampled_from(sorted(HEADERS)).flatmap(lambda h: st.sampled_from(
    [h, h.upper(), h.title(), "  " + h.replace(" ", " \t ")]))
PIECE = st.one_of(HEADER.map(lambda h: h + ":"), st.text(max_size=12),
                  st.sampled_from(["\n", "\n\n", ":", " ", "\t", "\r\n", "\u2028", "\x0b"]))
REPORT = st.lists(PIECE, max_size=12).map("".join)


@PROFILE
@given(REPORT)
@example("FINDINGS:")
@example("FINDINGS:\n\nIMPRESSION:\nNormal.")
@example("findings:\u2028impression: x")
@example("\u00a0")
def test_section_spans(text):
    spans = section_spans(text)
    last = 0
    for name, start, end in spans:
        assert name in set(HEADERS.values()) | {"preamble", "findings"}
        assert last <= start < end <= len(text)
        assert not text[start].isspace() and not text[end - 1].isspace()
        last = end
    if not text.strip():
        assert spans == []
    joined = split_sections(text)
    assert set(joined) == {name for name, _, _ in spans}
    for name, start, end in spans:
        assert text[start:end] in joined[name]


@PROFILE
@given(st.dictionaries(st.text(max_size=20) | HEADER, st.none() | st.text(max_size=20),
                       max_size=5))
@example({"FINDINGS:": " a ", "findings": "b"})
def test_split_sections_of_a_mapping(mapping):
    out = split_sections(mapping)
    for name, text in out.items():
        assert text == text.strip() and text
        assert name in set(HEADERS.values()) | {"other"}
    for key in mapping:
        assert section_name(key) in set(HEADERS.values()) | {"other"}
