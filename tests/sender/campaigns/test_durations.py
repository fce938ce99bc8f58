"""Durations: d, h, m, s, largest first, strict; a bad one is refused saying what a duration looks like."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sender.campaigns.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("0s", 0), ("90s", 90), ("30m", 1800), ("4h", 14_400), ("3d", 259_200), ("1d12h", 129_600),
    ("1h30m", 5400), ("2d3h4m5s", 2 * 86_400 + 3 * 3600 + 4 * 60 + 5), ("0d", 0),
])
def test_a_duration_is_whole_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "3", "3 d", " 3d", "3d ", "3D", "-3d", "+3d", "1.5h", "12h1d", "1d1d", "3w",
                                  "d", "3days", "1e3s", "３d", "3d\n"])
def test_anything_else_is_refused_naming_the_text(text: str) -> None:
    with pytest.raises(DurationError, match=r"is not a duration like 0s, 90s, 30m, 4h, 3d or 1d12h"):
        parse_duration(text)


@pytest.mark.parametrize("value", [0, 3, 2.5, True, None, ["3d"]])
def test_a_yaml_number_or_other_value_is_refused_with_a_hint_for_numbers(value: object) -> None:
    with pytest.raises(DurationError, match="is not a duration") as raised:
        parse_duration(value)
    assert ("write 3s" in str(raised.value)) == (value == 3 and value is not True)


@given(st.integers(min_value=0, max_value=400 * 86_400))
def test_a_formatted_duration_reads_back_as_the_same_seconds(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


def test_a_duration_formats_as_people_write_it() -> None:
    assert [format_duration(s) for s in (0, 90, 259_200, 129_600)] == ["0s", "1m30s", "3d", "1d12h"]
