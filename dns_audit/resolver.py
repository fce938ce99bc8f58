"""The one resolver interface every check uses, and the live implementation (async dnspython).

A lookup ends in one of: `ok` (records), `nxdomain`, `nodata`, `refused`, `failed` (timeout, SERVFAIL, network
error) or `unknown` (outside the zone files of an offline audit). `failed` is never "missing": checks report
it as `<area>.lookup_failed`. DNS timeouts and retries live here and only here.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype

from dns_audit.errors import AuditError
from dns_audit.findings import Location

Status = Literal["ok", "nxdomain", "nodata", "refused", "failed", "unknown"]
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_RETRIES = 2
MAX_CNAME_CHAIN = 8


@dataclass(frozen=True)
class Record:
    """One record's data in presentation form (TXT strings already joined), and its zone-file line if known."""

    text: str
    location: Location | None = None


@dataclass(frozen=True)
class Answer:
    name: str
    rdtype: str
    status: Status
    records: tuple[Record, ...] = ()
    cname: str | None = None  # the first CNAME target when `name` is an alias
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "refused")

    @property
    def unknown(self) -> bool:
        """Outside the zone files of an offline audit: neither present nor missing, so nothing is reported."""
        return self.status == "unknown"

    @property
    def absent(self) -> bool:
        return self.status in ("nxdomain", "nodata")

    def texts(self) -> list[str]:
        return [record.text for record in self.records]


class Resolver(Protocol):
    """What every check needs: one async lookup returning an Answer, never raising for DNS outcomes."""

    async def query(self, name: str, rdtype: str) -> Answer: ...


def covers(resolver: Resolver, domain: str) -> bool:
    """False when `resolver` has no data at all for `domain` (offline, a domain without a zone file). Resolvers
    may say so with a `covers(domain)` method; one without it answers for every name."""
    method = getattr(resolver, "covers", None)
    return bool(method(domain)) if callable(method) else True


def describe(resolver: Resolver) -> str:
    """Where `resolver`'s answers come from, for messages ("the zone files in zones", "nameserver …")."""
    method = getattr(resolver, "describe", None)
    return str(method()) if callable(method) else type(resolver).__name__


def normalize(name: str) -> str:
    return name.rstrip(".").lower()


def parse_nameserver(text: str) -> tuple[str, int]:
    """`HOST[:PORT]` (IPv6 as `[addr]:port`) -> (ip, port); a clear AuditError otherwise."""
    host, port_text = text, "53"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    try:
        ipaddress.ip_address(host)
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError
    except ValueError:
        raise AuditError(f"--nameserver {text!r}: expected an IP address with an optional port, "
                         "e.g. 127.0.0.1:5353 or [::1]:53") from None
    return host, port


def txt_text(rdata: object) -> str:
    """TXT strings joined as RFC 7208 §3.3 says; undecodable bytes kept visible, not dropped."""
    strings = getattr(rdata, "strings", ())
    return "".join(s.decode("utf-8", errors="backslashreplace") for s in strings)


def rdata_text(rdtype: str, rdata: object) -> str:
    if rdtype == "TXT":
        return txt_text(rdata)
    return str(rdata).rstrip(".") if rdtype in ("PTR", "CNAME", "NS") else str(rdata)


class LiveResolver:
    """Async stub resolver with a shared answer cache: each (name, type) is asked once per resolver instance,
    even when many domains (or concurrent tasks) need it.

    `queries_sent` counts packets put on the wire, `distinct_names` the (name, type) pairs asked for.
    """

    def __init__(self, nameservers: Sequence[tuple[str, int]], timeout: float = DEFAULT_TIMEOUT_S,
                 retries: int = DEFAULT_RETRIES, recursion_desired: bool = True) -> None:
        if not nameservers:
            raise AuditError("no nameserver configured: pass --nameserver HOST[:PORT]")
        self.nameservers = list(nameservers)
        self.timeout = timeout
        self.retries = retries
        self.recursion_desired = recursion_desired
        self.queries_sent = 0
        self.responses_received = 0
        self._cache: dict[tuple[str, str], asyncio.Future[Answer]] = {}

    @property
    def distinct_names(self) -> int:
        return len(self._cache)

    def covers(self, domain: str) -> bool:
        return True

    def describe(self) -> str:
        return "nameserver " + ", ".join(f"{host}:{port}" for host, port in self.nameservers)

    async def query(self, name: str, rdtype: str) -> Answer:
        answer = await self._query_once(name, rdtype)
        for _ in range(MAX_CNAME_CHAIN):
            if answer.error != "unresolved-alias" or answer.cname is None:
                break
            target = await self._query_once(answer.cname, rdtype)
            answer = Answer(name, rdtype, target.status, target.records, answer.cname,
                            target.error if target.error != "unresolved-alias" else "")
            if target.error == "unresolved-alias":
                answer = Answer(name, rdtype, "nodata", (), target.cname, "unresolved-alias")
        return answer

    async def _query_once(self, name: str, rdtype: str) -> Answer:
        key = (normalize(name), rdtype.upper())
        pending = self._cache.get(key)
        if pending is not None and pending.done():
            if not pending.cancelled() and pending.exception() is None:
                return pending.result()
            pending = None  # a lookup cut off by an earlier run's shutdown: ask again
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():
            pending = asyncio.ensure_future(self._resolve(*key))
            self._cache[key] = pending
        # shield: one caller hitting its deadline must not cancel the lookup others share
        return await asyncio.shield(pending)

    async def _resolve(self, name: str, rdtype: str) -> Answer:
        try:
            qname = dns.name.from_text(name)
        except (dns.exception.DNSException, UnicodeError) as exc:
            return Answer(name, rdtype, "failed", error=f"invalid name: {exc}")
        response: dns.message.Message | None = None
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            host, port = self.nameservers[attempt % len(self.nameservers)]
            request = dns.message.make_query(qname, rdtype, use_edns=0, payload=1232)
            if not self.recursion_desired:
                request.flags &= ~dns.flags.RD
            try:
                self.queries_sent += 1
                response = await dns.asyncquery.udp(request, host, port=port, timeout=self.timeout)
                if response.flags & dns.flags.TC:
                    self.queries_sent += 1
                    response = await dns.asyncquery.tcp(request, host, port=port, timeout=self.timeout)
            except dns.exception.Timeout:
                errors.append(f"timeout after {self.timeout:g}s from {host}:{port}")
                continue
            except (OSError, dns.exception.DNSException, EOFError) as exc:
                errors.append(f"{type(exc).__name__} from {host}:{port}: {exc}")
                await asyncio.sleep(random.uniform(0, 0.05))
                continue
            self.responses_received += 1
            if response.rcode() == dns.rcode.SERVFAIL and attempt < self.retries:
                errors.append(f"SERVFAIL from {host}:{port}")
                continue
            break
        else:
            return Answer(name, rdtype, "failed", error="; ".join(errors))
        assert response is not None
        return self._answer(name, rdtype, qname, response)

    def _answer(self, name: str, rdtype: str, qname: dns.name.Name, response: dns.message.Message) -> Answer:
        rcode = response.rcode()
        if rcode == dns.rcode.REFUSED:
            return Answer(name, rdtype, "refused", error="REFUSED")
        if rcode == dns.rcode.NXDOMAIN:
            return Answer(name, rdtype, "nxdomain")
        if rcode != dns.rcode.NOERROR:
            return Answer(name, rdtype, "failed", error=dns.rcode.to_text(rcode))
        wanted = dns.rdatatype.from_text(rdtype)
        owner, first_cname = qname, None
        for _ in range(MAX_CNAME_CHAIN):
            rrset = response.get_rrset(response.answer, owner, dns.rdataclass.IN, wanted)
            if rrset is not None:
                records = tuple(Record(rdata_text(rdtype, rdata)) for rdata in rrset)
                return Answer(name, rdtype, "ok", records, cname=first_cname)
            alias = response.get_rrset(response.answer, owner, dns.rdataclass.IN, dns.rdatatype.CNAME)
            if alias is None or wanted == dns.rdatatype.CNAME:
                break
            owner = alias[0].target
            first_cname = first_cname or owner.to_text().rstrip(".")
        # an alias whose target is out of this response (another zone): say where to continue
        return Answer(name, rdtype, "nodata", cname=owner.to_text().rstrip(".") if first_cname else None,
                      error="unresolved-alias" if first_cname else "")


def system_nameservers() -> list[tuple[str, int]]:
    """The host's resolvers from /etc/resolv.conf, for when no --nameserver is given."""
    import dns.resolver

    try:
        configured = dns.resolver.Resolver(configure=True).nameservers
    except dns.resolver.NoResolverConfiguration:
        return []
    return [(str(ns), 53) for ns in configured]



