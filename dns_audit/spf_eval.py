"""RFC 7208 `check_host()`: evaluate a domain's SPF record for one client IP, as a receiver does.

Limits as receivers apply them (§4.6.4): 10 DNS-querying terms, 2 void lookups, 10 MX names per `mx`, 10 PTR
names per `ptr`. The resolver is injected; an `unknown` answer (outside the zone files of an offline audit) ends
the evaluation with `unknown`, which `check_host` reports as temperror.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from dns_audit.resolver import Answer, Resolver, normalize
from dns_audit.spf_syntax import SpfRecord, SpfSyntaxError, Term, check_macro_string, expand_macros, is_spf, parse_spf

LOOKUP_LIMIT = 10
VOID_LIMIT = 2
MX_LIMIT = 10
PTR_LIMIT = 10
_RESULTS = {"+": "pass", "-": "fail", "~": "softfail", "?": "neutral"}
DEFAULT_EXPLANATION = "See your mail administrator's SPF policy"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class _PermError(Exception):
    pass


class _TempError(Exception):
    pass


class _OutsideData(Exception):
    """A lookup left the zone files of an offline audit: the result cannot be known."""


@dataclass
class _Evaluation:
    """One check_host run: the connection, the shared lookup budget, and the resolver."""

    resolver: Resolver
    ip: Address
    sender: str
    helo: str
    lookups: int = 0
    voids: int = 0
    validated_names: dict[str, str] = field(default_factory=dict)  # %{p} per domain
    explanation: str | None = None  # set when a `-` mechanism matched in a record whose exp= applies
    default_explanation: str = DEFAULT_EXPLANATION

    async def query(self, name: str, rdtype: str) -> Answer:
        answer = await self.resolver.query(name, rdtype)
        if answer.unknown:
            raise _OutsideData(f"{rdtype} {name}: {answer.error or 'unknown'}")
        return answer

    def count_lookup(self) -> None:
        self.lookups += 1
        if self.lookups > LOOKUP_LIMIT:
            raise _PermError

    def count_void(self, answer: Answer) -> None:
        if answer.absent:
            self.voids += 1
            if self.voids > VOID_LIMIT:
                raise _PermError

    async def expand(self, spec: str, domain: str) -> str:
        """A domain-spec with its macros expanded, cut to 253 characters from the left (§7.3)."""
        if "%" not in spec:
            return spec
        validated = await self.validated_name(domain) if "%{p" in spec.lower() else "unknown"
        expanded = expand_macros(spec, ip=str(self.ip), domain=domain, sender=self.sender, helo=self.helo,
                                 validated=validated)
        while len(expanded) > 253 and "." in expanded:
            expanded = expanded.split(".", 1)[1]
        return expanded

    async def validated_name(self, domain: str) -> str:
        """%{p}: a forward-confirmed PTR name of the client, preferring `domain` or one of its subdomains."""
        if domain not in self.validated_names:
            names = await self.confirmed_names()
            target = domain.lower()
            preferred = [n for n in names if n == target or n.endswith("." + target)]
            self.validated_names[domain] = (preferred or names or ["unknown"])[0]
        return self.validated_names[domain]

    async def confirmed_names(self) -> list[str]:
        """The client's PTR names (at most 10) whose A/AAAA records include the client's address (§5.5)."""
        reverse = await self.query(self.ip.reverse_pointer, "PTR")
        if reverse.failed:
            return []
        confirmed = []
        for name in reverse.texts()[:PTR_LIMIT]:
            forward = await self.query(name, "A" if self.ip.version == 4 else "AAAA")
            if any(_same_address(self.ip, text) for text in forward.texts()):
                confirmed.append(normalize(name))
        return confirmed


def _same_address(ip: Address, text: str) -> bool:
    try:
        return ipaddress.ip_address(text) == ip
    except ValueError:
        return False


def client_address(ip: str) -> Address:
    """The client IP; an IPv4-mapped IPv6 address is the IPv4 client it stands for (§5: ip4 and `a` apply)."""
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def well_formed(domain: str) -> bool:
    """§4.3: a domain that is not a multi-label name with labels of 1..63 characters gives `none`."""
    labels = domain.rstrip(".").split(".")
    return len(labels) >= 2 and all(0 < len(label) <= 63 for label in labels) and not domain.startswith("[")


async def check_host(resolver: Resolver, ip: str, domain: str, sender: str | None = None,
                     helo: str | None = None) -> str:
    """RFC 7208 §4 evaluation: pass, fail, softfail, neutral, none, permerror or temperror."""
    result = await evaluate(resolver, ip, domain, sender, helo)
    return "temperror" if result == "unknown" else result


async def evaluate(resolver: Resolver, ip: str, domain: str, sender: str | None = None,
                   helo: str | None = None) -> str:
    """check_host, plus `unknown` when a lookup left the zone files of an offline audit."""
    if not well_formed(domain):
        return "none"
    run = _Evaluation(resolver, client_address(ip), sender or f"postmaster@{domain}", helo or domain)
    try:
        return await _check(run, domain)
    except _PermError:
        return "permerror"
    except _TempError:
        return "temperror"
    except _OutsideData:
        return "unknown"


async def check_host_for(resolver: Resolver, ip: str, mail_from: str, helo: str) -> str:
    """check_host for one SMTP transaction: the MAIL FROM domain, or `postmaster@<helo>` for an empty one."""
    result, _ = await explain_host_for(resolver, ip, mail_from, helo)
    return result


async def explain_host_for(resolver: Resolver, ip: str, mail_from: str, helo: str,
                           default_explanation: str = DEFAULT_EXPLANATION) -> tuple[str, str | None]:
    """check_host for one SMTP transaction, with the explanation of a `fail` (§6.2; None for other results)."""
    local, at, domain = mail_from.rpartition("@")
    if not mail_from or not at:
        domain, sender = helo, f"postmaster@{helo}"
    else:
        sender = f"{local or 'postmaster'}@{domain}"
    if not well_formed(domain):
        return "none", None
    run = _Evaluation(resolver, client_address(ip), sender, helo, default_explanation=default_explanation)
    try:
        result = await _check(run, domain)
    except _PermError:
        return "permerror", None
    except (_TempError, _OutsideData):
        return "temperror", None
    return result, (run.explanation or default_explanation) if result == "fail" else None


async def _explain(run: _Evaluation, domain: str, record: SpfRecord) -> str:
    """§6.2: the TXT record named by exp=, its macros expanded; the default on any problem with it."""
    spec = record.modifier("exp")
    if not spec:
        return run.default_explanation
    try:
        target = await run.expand(spec, domain)
        answer = await run.query(target, "TXT") if well_formed(target) else None
    except (_TempError, _OutsideData, ValueError):
        return run.default_explanation
    if answer is None or answer.status != "ok" or len(answer.records) != 1:
        return run.default_explanation
    text = answer.records[0].text
    try:
        for word in text.split(" "):
            check_macro_string(word, "exp", explanation=True)
    except SpfSyntaxError:
        return run.default_explanation
    validated = await run.validated_name(domain) if "%{p" in text.lower() else "unknown"
    return expand_macros(text, ip=str(run.ip), domain=domain, sender=run.sender, helo=run.helo,
                         validated=validated)


async def _check(run: _Evaluation, domain: str, explain: bool = True) -> str:
    answer = await run.query(domain, "TXT")
    if answer.failed:
        raise _TempError
    records = [t for t in answer.texts() if is_spf(t)]
    if not records:
        return "none"
    if len(records) > 1:
        raise _PermError
    try:
        record = parse_spf(records[0])
    except SpfSyntaxError:
        raise _PermError from None
    for term in record.mechanisms:
        if term.queries_dns:
            run.count_lookup()
        if await _matches(run, domain, term):
            if term.qualifier == "-" and explain:
                run.explanation = await _explain(run, domain, record)
            return _RESULTS[term.qualifier]
    redirect = record.modifier("redirect")
    if redirect and record.all_term is None:
        run.count_lookup()
        target = await run.expand(redirect, domain)
        if not well_formed(target):
            raise _PermError
        result = await _check(run, target, explain)  # the target's exp= applies, not this record's
        if result == "none":
            raise _PermError
        return result
    return "neutral"


async def _addresses(run: _Evaluation, name: str) -> list[str]:
    answer = await run.query(name, "A" if run.ip.version == 4 else "AAAA")
    if answer.failed:
        raise _TempError
    run.count_void(answer)
    return answer.texts()


def _in_network(ip: Address, address: str, term: Term) -> bool:
    prefix = term.cidr4 if ip.version == 4 else term.cidr6
    try:
        network = ipaddress.ip_network(f"{address}/{prefix if prefix is not None else ip.max_prefixlen}", strict=False)
    except ValueError:
        return False
    return network.version == ip.version and ip in network


async def _target(run: _Evaluation, domain: str, term: Term) -> str:
    target = await run.expand(term.value, domain) if term.value else domain
    return target.rstrip(".")


async def _matches(run: _Evaluation, domain: str, term: Term) -> bool:
    ip = run.ip
    if term.name == "all":
        return True
    if term.name in ("ip4", "ip6"):
        network = ipaddress.ip_network(term.value or "", strict=False)
        return network.version == ip.version and ip in network
    target = await _target(run, domain, term)
    if term.name == "include":
        if not well_formed(target):
            raise _PermError
        result = await _check(run, target, explain=False)  # an included record's exp= is never used
        if result == "none":
            raise _PermError
        return result == "pass"
    if not well_formed(target):
        return False  # an expansion that is no domain name matches nothing (§4.8)
    if term.name == "a":
        return any(_in_network(ip, a, term) for a in await _addresses(run, target))
    if term.name == "mx":
        answer = await run.query(target, "MX")
        if answer.failed:
            raise _TempError
        run.count_void(answer)
        hosts = [mx.split()[-1].rstrip(".") for mx in answer.texts()]
        if len(hosts) > MX_LIMIT:
            raise _PermError
        for host in hosts:
            if any(_in_network(ip, a, term) for a in await _addresses(run, host)):
                return True
        return False
    if term.name == "exists":
        answer = await run.query(target, "A")
        if answer.failed:
            raise _TempError
        run.count_void(answer)
        return answer.status == "ok"
    if term.name == "ptr":
        wanted = target.lower()
        return any(name == wanted or name.endswith("." + wanted) for name in await run.confirmed_names())
    return False
