"""FakeDns: an in-memory resolver for `check_host` tests, answering as a DNS server does (ok, nxdomain, nodata,
and `failed` for names marked as timing out), from a {name: {type: [records]}} mapping. No network."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dns_audit.resolver import Answer, Record, normalize


class FakeDns:
    """Answers from `zone`; a name in `timeouts` fails every lookup (a TIMEOUT), as an unreachable server does."""

    def __init__(self, zone: Mapping[str, Mapping[str, Iterable[str]]], timeouts: Iterable[str] = ()) -> None:
        self.zone = {normalize(name): {t.upper(): list(v) for t, v in types.items()} for name, types in zone.items()}
        self.timeouts = {normalize(n) for n in timeouts}
        self.queries: list[tuple[str, str]] = []

    async def query(self, name: str, rdtype: str) -> Answer:
        key, rdtype = normalize(name), rdtype.upper()
        self.queries.append((key, rdtype))
        if key in self.timeouts:
            return Answer(name, rdtype, "failed", error="timeout")
        types = self.zone.get(key)
        if types is None:
            exists = any(other.endswith("." + key) for other in self.zone)
            return Answer(name, rdtype, "nodata" if exists else "nxdomain")
        if types.get(rdtype):
            return Answer(name, rdtype, "ok", tuple(Record(text) for text in types[rdtype]))
        if "TIMEOUT" in types:
            return Answer(name, rdtype, "failed", error="timeout")
        return Answer(name, rdtype, "nodata")

    def covers(self, domain: str) -> bool:
        return True

    def describe(self) -> str:
        return "an in-memory zone"
