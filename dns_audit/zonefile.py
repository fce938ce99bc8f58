"""Offline resolver over a directory of zone files (DNS-as-code in CI before deploy).

Each record keeps the file and line it came from, so findings can point at it. Names outside every zone are
`unknown` ("not in the zone files") unless a fallback resolver (e.g. the live one) is given.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.tokenizer
import dns.zonefile

from dns_audit.errors import ZoneFileError
from dns_audit.findings import Location
from dns_audit.resolver import Answer, Record, Resolver, normalize, rdata_text

ZONE_SUFFIXES = (".zone", ".db", ".txt")


@dataclass(frozen=True)
class ZoneRecord:
    name: str
    rdtype: str
    text: str
    location: Location


class _Manager:
    """Just enough of dnspython's transaction manager for its zone-file Reader."""

    def __init__(self, origin: dns.name.Name) -> None:
        self.origin = origin

    def origin_information(self) -> tuple[dns.name.Name, bool, dns.name.Name]:
        return self.origin, False, self.origin


class _Collector:
    """A stand-in transaction that keeps every record with the line it was read from."""

    def __init__(self, origin: dns.name.Name, path: str) -> None:
        self.manager = _Manager(origin)
        self.path = path
        self.line = 0
        self.records: list[ZoneRecord] = []

    def check_put_rdataset(self, _check: Any) -> None:
        pass

    def _set_origin(self, _origin: dns.name.Name) -> None:
        pass

    def add_unicode(self, _value: str) -> None:
        pass

    def add(self, name: dns.name.Name, _ttl: int, rdata: dns.rdata.Rdata) -> None:
        rdtype = dns.rdatatype.to_text(rdata.rdtype)
        self.records.append(ZoneRecord(normalize(name.to_text()), rdtype, rdata_text(rdtype, rdata),
                                       Location(self.path, self.line)))


class _LineReader(dns.zonefile.Reader):
    """dnspython's zone-file reader, remembering the line on which each record starts."""

    def _rr_line(self) -> None:
        collector = self.txn
        assert isinstance(collector, _Collector)
        collector.line = self.tok.where()[1]
        super()._rr_line()

    def _generate_line(self) -> None:
        # One $GENERATE line can expand to millions of records: a zone file under audit may be hostile.
        raise dns.exception.SyntaxError("$GENERATE is not accepted in audited zone files: write the records out")


def origin_for(path: Path) -> str:
    name = path.name
    for suffix in ZONE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_zone_file(path: Path, display_path: str) -> list[ZoneRecord]:
    """Parse one zone file; ZoneFileError with file:line on a syntax error."""
    try:
        origin = dns.name.from_text(origin_for(path))
        with path.open(encoding="utf-8") as handle:
            collector = _Collector(origin, display_path)
            tokenizer = dns.tokenizer.Tokenizer(handle, display_path)
            reader = _LineReader(tokenizer, dns.rdataclass.IN, collector)  # type: ignore[arg-type]
            reader.read()
    except dns.exception.SyntaxError as exc:
        raise ZoneFileError(f"{exc} (fix the record in the zone file)") from None
    except (dns.exception.DNSException, UnicodeError, ValueError) as exc:
        raise ZoneFileError(f"{display_path}: {type(exc).__name__}: {exc}") from None
    return collector.records


class ZoneResolver:
    """Answers from zone files; out-of-zone names go to `fallback` when given."""

    def __init__(self, zone_dir: Path, fallback: Resolver | None = None) -> None:
        if not zone_dir.is_dir():
            raise ZoneFileError(f"--zone-dir {zone_dir}: not a directory of zone files")
        files = sorted(p for p in zone_dir.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise ZoneFileError(f"--zone-dir {zone_dir}: no zone files (name them <origin>.zone)")
        self.fallback = fallback
        self.zone_dir = zone_dir
        self.origins: list[str] = []
        self._records: dict[tuple[str, str], list[ZoneRecord]] = defaultdict(list)
        self._names: set[str] = set()
        for path in files:
            self.origins.append(normalize(origin_for(path)))
            for record in read_zone_file(path, str(path)):
                self._records[(record.name, record.rdtype)].append(record)
                self._names.add(record.name)

    def _in_zone(self, name: str) -> bool:
        return any(name == origin or name.endswith("." + origin) for origin in self.origins)

    def _wildcard(self, key: str, rdtype: str) -> list[ZoneRecord]:
        """RFC 4592 in short: a name that does not exist takes the records of `*.<closest existing parent>`."""
        if key in self._names:
            return []
        labels = key.split(".")
        for cut in range(1, len(labels)):
            parent = ".".join(labels[cut:])
            found = self._records.get((f"*.{parent}", rdtype))
            if found or parent in self._names:
                return found or []
        return []

    def covers(self, domain: str) -> bool:
        return self._in_zone(normalize(domain)) or self.fallback is not None

    def describe(self) -> str:
        return f"the zone files in {self.zone_dir}"

    async def query(self, name: str, rdtype: str) -> Answer:
        key, rdtype = normalize(name), rdtype.upper()
        if not self._in_zone(key):
            if self.fallback is not None:
                return await self.fallback.query(name, rdtype)
            return Answer(name, rdtype, "unknown", error="not in the zone files (add --nameserver to look it up)")
        first_cname: str | None = None
        for _ in range(8):
            found = self._records.get((key, rdtype)) or self._wildcard(key, rdtype)
            if found:
                records = tuple(Record(r.text, r.location) for r in found)
                return Answer(name, rdtype, "ok", records, cname=first_cname)
            alias = self._records.get((key, "CNAME"))
            if not alias or rdtype == "CNAME":
                break
            key = normalize(alias[0].text)
            first_cname = first_cname or key
            if not self._in_zone(key):
                if self.fallback is None:
                    return Answer(name, rdtype, "unknown", cname=first_cname, error="alias leaves the zone files")
                target = await self.fallback.query(key, rdtype)
                return Answer(name, rdtype, target.status, target.records, first_cname, target.error)
        exists = key in self._names or any(n.endswith("." + key) for n in self._names)
        return Answer(name, rdtype, "nodata" if exists else "nxdomain", cname=first_cname)
