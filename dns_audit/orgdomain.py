"""Organizational domains (RFC 7489 §3.2) from the Public Suffix List (the `publicsuffixlist` package)."""

from __future__ import annotations

from functools import lru_cache

from publicsuffixlist import PublicSuffixList


@lru_cache(maxsize=1)
def _psl() -> PublicSuffixList:
    # Loading the bundled list takes a moment; do it once per process, on first use, never at import.
    return PublicSuffixList()


def organizational_domain(domain: str) -> str:
    """The registrable domain (`mail.example.co.uk` -> `example.co.uk`); the name itself when it is a suffix."""
    name = domain.rstrip(".").lower()
    return _psl().privatesuffix(name) or name


def aligned(first: str, second: str, mode: str) -> bool:
    """DMARC identifier alignment: `s` strict (equal names), `r` relaxed (same organizational domain)."""
    a, b = first.rstrip(".").lower(), second.rstrip(".").lower()
    if mode == "s":
        return a == b
    return organizational_domain(a) == organizational_domain(b)
