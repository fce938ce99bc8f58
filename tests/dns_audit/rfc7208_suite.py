"""The openspf RFC 7208 test suite (203 scenarios with their zone data), fetched at test time from the pyspf source
distribution on PyPI (never copied into this repository), and an in-memory resolver serving each scenario's zone
data the way the suite's reference driver (pyspf's testspf.py) does."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dns_audit.resolver import Answer, Record, normalize

PYSPF = "pyspf==2.0.14"
SUITE_MEMBER = "test/rfc7208-tests.yml"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sendhost-tests" / "rfc7208-tests.yml"


class SuiteUnavailable(Exception):
    """The suite could not be fetched (no PyPI access)."""


def fetch_suite(cache: Path = CACHE) -> Path:
    """The suite's YAML, from the cache or else `pip download` of the pyspf sdist; SuiteUnavailable when neither."""
    if cache.exists():
        return cache
    with tempfile.TemporaryDirectory() as scratch:
        try:
            result = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
                                     ":all:", PYSPF, "-d", scratch], capture_output=True, text=True, timeout=300,
                                    check=False)
        except subprocess.TimeoutExpired:
            raise SuiteUnavailable(f"pip download {PYSPF} did not finish in 300 s") from None
        archives = list(Path(scratch).glob("pyspf-*.tar.gz"))
        if result.returncode != 0 or not archives:
            raise SuiteUnavailable(f"pip download {PYSPF} failed: {result.stderr.strip()[-300:]}")
        with tarfile.open(archives[0]) as archive:
            member = next(m for m in archive.getmembers() if m.name.endswith(SUITE_MEMBER))
            extracted = archive.extractfile(member)
            assert extracted is not None
            data = extracted.read()
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(cache)
    return cache


@dataclass(frozen=True)
class Scenario:
    """One test of the suite: the connection (client IP, MAIL FROM, HELO) and the acceptable results."""

    name: str
    host: str
    mailfrom: str
    helo: str
    results: tuple[str, ...]
    explanation: str | None
    zone: dict[str, list[Any]]


def load_scenarios(path: Path) -> list[Scenario]:
    scenarios = []
    with path.open("rb") as handle:
        for document in yaml.safe_load_all(handle):
            zone = {normalize(name): list(records or []) for name, records in document["zonedata"].items()}
            for name, test in document["tests"].items():
                results = test["result"] if isinstance(test["result"], list) else [test["result"]]
                scenarios.append(Scenario(name, str(test["host"]), str(test.get("mailfrom", "")),
                                          str(test.get("helo", "")), tuple(results), test.get("explanation"),
                                          zone))
    return scenarios


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


class SuiteDns:
    """FakeDns for one scenario, as the reference driver serves it: TXT answers fall back to the name's type-SPF
    data (the suite writes most records as SPF), a `TIMEOUT` entry times out queries for types not answered
    before it, `{TYPE: TIMEOUT}` times out that type, a CNAME is followed, and names under `error.` time out."""

    def __init__(self, zone: dict[str, list[Any]]) -> None:
        self.zone = zone

    def _entries(self, key: str) -> list[tuple[str, Any]] | None:
        records = self.zone.get(key)
        if records is None:
            return None
        entries: list[tuple[str, Any]] = []
        for record in records:
            if record == "TIMEOUT":
                entries.append(("TIMEOUT", None))
            else:
                entries.extend(record.items())
        if not any(kind == "TXT" for kind, _ in entries):
            entries += [("TXT", value) for kind, value in entries if kind == "SPF"]
        return entries

    async def query(self, name: str, rdtype: str, depth: int = 0) -> Answer:
        key, rdtype = normalize(name), rdtype.upper()
        if any(len(label) > 63 for label in key.split(".")):
            return Answer(name, rdtype, "failed", error="label too long")
        entries = self._entries(key)
        if entries is None:
            if key.startswith("error."):
                return Answer(name, rdtype, "failed", error="timeout")
            exists = any(other.endswith("." + key) for other in self.zone)
            return Answer(name, rdtype, "nodata" if exists else "nxdomain")
        found: list[str] = []
        for kind, value in entries:
            if kind == "TIMEOUT" and not found:
                return Answer(name, rdtype, "failed", error="timeout")
            if kind == rdtype and value == "TIMEOUT":
                return Answer(name, rdtype, "failed", error="timeout")
            if kind == rdtype and value != "NONE":
                found.append(self._presentation(kind, value))
        if found:
            return Answer(name, rdtype, "ok", tuple(Record(text) for text in found))
        cname = next((value for kind, value in entries if kind == "CNAME"), None)
        if cname and depth < 8:
            target = await self.query(cname, rdtype, depth + 1)
            return Answer(name, rdtype, target.status, target.records, normalize(cname), target.error)
        return Answer(name, rdtype, "nodata")

    @staticmethod
    def _presentation(kind: str, value: Any) -> str:
        if kind == "MX":
            preference, host = value
            return f"{preference} {host}"
        return _text(value)

    def covers(self, domain: str) -> bool:
        return True

    def describe(self) -> str:
        return "the RFC 7208 suite's zone data"
