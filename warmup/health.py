"""Health gates: spam rates as Gmail Postmaster Tools reports them, and what a rate means for the ramp."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Literal

from warmup.errors import WarmupConfigError

RateGate = Literal["ok", "hold", "pause"]  # what a spam rate means for the ramp

HOLD_AT = 0.001  # 0.1%: the ramp stops rising
PAUSE_AT = 0.003  # 0.3%: Gmail's hard line; sending pauses and the ramp steps back
# A bare number at or above this is refused: `0.3` might mean 0.3% or 30%.
AMBIGUOUS_FROM = Decimal("0.1")


def verdict(rate: float) -> RateGate:
    """What a day's spam rate (a fraction) means: ok, hold the ramp, or pause and step back."""
    if rate >= PAUSE_AT:
        return "pause"
    if rate >= HOLD_AT:
        return "hold"
    return "ok"


def parse_rate(text: str) -> float:
    """`0.3%` or `0.003` -> 0.003. A bare number of 0.1 or more is ambiguous and refused."""
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = Decimal(raw.rstrip("%").strip())
    except InvalidOperation:
        raise WarmupConfigError(f"spam rate {text!r} is not a number; write a percentage like 0.3% or a fraction "
                                "like 0.003") from None
    if not value.is_finite() or value < 0:
        raise WarmupConfigError(f"spam rate {text!r} must be a non-negative number like 0.3% or 0.003")
    if percent:
        if value > 100:
            raise WarmupConfigError(f"spam rate {text!r} is over 100%; write a percentage like 0.3%")
        return float(value / 100)
    if value >= AMBIGUOUS_FROM:
        raise WarmupConfigError(f"spam rate {text!r} is ambiguous (a fraction or a percentage?); write 0.3% for "
                                "a percentage or 0.003 for a fraction")
    return float(value)


def format_rate(rate: float) -> str:
    """0.003 -> '0.3%' (as Postmaster Tools shows it)."""
    return f"{Decimal(str(rate)) * 100:f}".rstrip("0").rstrip(".") + "%"
