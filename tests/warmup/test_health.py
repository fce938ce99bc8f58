"""Spam-rate parsing and the health gates."""

from __future__ import annotations

import pytest

from warmup.errors import WarmupConfigError
from warmup.health import format_rate, parse_rate, verdict


@pytest.mark.parametrize(("text", "rate"), [("0.3%", 0.003), ("0.003", 0.003), ("0.1%", 0.001), ("0%", 0.0),
                                            ("0.05", 0.05), (" 1.5% ", 0.015)])
def test_rates_as_percent_or_fraction(text: str, rate: float) -> None:
    assert parse_rate(text) == pytest.approx(rate)


@pytest.mark.parametrize("text", ["3", "0.3", "1", "12"])
def test_bare_numbers_that_could_be_percentages_are_refused(text: str) -> None:
    with pytest.raises(WarmupConfigError, match=r"ambiguous .* write 0\.3% .* or 0\.003"):
        parse_rate(text)


@pytest.mark.parametrize("text", ["abc", "-0.1%", "101%", "nan", ""])
def test_malformed_rates_are_refused(text: str) -> None:
    with pytest.raises(WarmupConfigError, match="spam rate"):
        parse_rate(text)


def test_gates_at_and_above_thresholds() -> None:
    assert verdict(parse_rate("0.09%")) == "ok"
    assert verdict(parse_rate("0.1%")) == "hold"
    assert verdict(parse_rate("0.29%")) == "hold"
    assert verdict(parse_rate("0.3%")) == "pause"
    assert verdict(0.02) == "pause"


def test_format_rate_reads_like_postmaster_tools() -> None:
    assert format_rate(0.003) == "0.3%"
    assert format_rate(0.0005) == "0.05%"
