"""The stacked chart's drawing: each column's parts as shares of their sum, in cells that add up to its height."""

from __future__ import annotations

from rich.style import Style

from gpusight.ui.widgets.chart import ASCII_STACK_GLYPHS, STACK_GLYPHS, stack_cells, stacked_rows

STYLES = [Style(color=color) for color in ("yellow", "green", "magenta", "blue", "white")]


def columns(rows: list[str]) -> list[str]:
    """The rows read as columns, bottom cell first."""
    return ["".join(row[x] for row in reversed(rows)) for x in range(len(rows[0]))]


def test_cells_follow_the_shares_and_fill_the_height() -> None:
    assert stack_cells([38.0, 52.0, 5.0, 3.0, 2.0], 10) == [4, 5, 1, 0, 0]
    assert stack_cells([50.0, 50.0, 0.0, 0.0, 0.0], 7) in ([4, 3, 0, 0, 0], [3, 4, 0, 0, 0])
    for shares in ([12.5, 70.0, 9.0, 6.0, 2.5], [1.0, 1.0, 1.0, 1.0, 1.0], [99.0, 1.0, 0.0, 0.0, 0.0]):
        assert sum(stack_cells(shares, 9)) == 9


def test_shares_above_100_are_drawn_as_shares_of_their_sum() -> None:
    # a column holding each part's largest share of its period can sum past 100
    assert stack_cells([60.0, 80.0, 20.0, 20.0, 20.0], 10) == [3, 4, 1, 1, 1]


def test_nothing_known_draws_blank() -> None:
    assert stack_cells([None, None, None, None, None], 5) is None
    assert stack_cells([0.0, 0.0, 0.0, 0.0, 0.0], 5) is None
    rows = stacked_rows([[None, 50.0], [None, 50.0]], 4, 4, STYLES[:2])
    assert [strip.text for strip in rows] == ["   " + STACK_GLYPHS[1]] * 2 + ["   " + STACK_GLYPHS[0]] * 2


def test_each_part_stacks_bottom_up_in_its_glyph_newest_at_the_right() -> None:
    parts = [[80.0, 20.0], [20.0, 80.0]]  # data wait, then compute
    rows = [strip.text for strip in stacked_rows(parts, 2, 5, STYLES[:2])]
    assert columns(rows) == [STACK_GLYPHS[0] * 4 + STACK_GLYPHS[1], STACK_GLYPHS[0] + STACK_GLYPHS[1] * 4]
    ascii_rows = [strip.text for strip in stacked_rows(parts, 2, 5, STYLES[:2], ascii_mode=True)]
    assert columns(ascii_rows) == [ASCII_STACK_GLYPHS[0] * 4 + ASCII_STACK_GLYPHS[1],
                                   ASCII_STACK_GLYPHS[0] + ASCII_STACK_GLYPHS[1] * 4]
    assert "".join(ascii_rows).isascii()


def test_each_part_keeps_its_colour() -> None:
    rows = stacked_rows([[50.0], [50.0]], 1, 2, STYLES[:2])
    assert [segment.style for segment in rows[0]] == [STYLES[1]]
    assert [segment.style for segment in rows[1]] == [STYLES[0]]
