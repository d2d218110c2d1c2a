"""Hostile process names and command lines never reach the terminal as escapes or control characters."""

from hypothesis import given, settings
from hypothesis import strategies as st

from gpusight.textsafe import safe_text

HOSTILE = [
    ("\x1b[31mred\x1b[0m", "red"),
    ("\x1b]0;owned\x07title", "title"),
    ("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("\x1bPq#0;2;0;0;0\x1b\\after", "after"),
    ("a\rb\nc\td", "a?b?c?d"),
    ("nul\x00byte", "nul?byte"),
    ("\x9b31mc1", "c1"),
    ("rtl\u202eoverride", "rtl?override"),
    ("[red]markup[/red]", "[red]markup[/red]"),
]


def test_known_hostile_strings_are_neutralised():
    for raw, expected in HOSTILE:
        assert safe_text(raw) == expected


def test_none_and_empty_give_empty_text():
    assert safe_text(None) == ""
    assert safe_text("") == ""


def test_long_text_is_cut_with_an_ellipsis():
    out = safe_text("x" * 100_000, 40)
    assert len(out) == 40 and out.endswith("…")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200), st.one_of(st.none(), st.integers(1, 80)))
def test_output_never_contains_escape_or_control_characters(text, limit):
    out = safe_text(text, limit)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in out)
    assert "\u202e" not in out and "\u2028" not in out
    if limit is not None:
        assert len(out) <= limit


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_invalid_utf8_decoded_with_replacement_is_made_safe(raw):
    out = safe_text(raw.decode("utf-8", errors="replace"))
    assert "\x1b" not in out
