"""The one inventory: an Ansible YAML inventory whose `sendhost_*` variables are sendhost's configuration.

`load_inventory` validates it against the schema below and returns the records of `sendhost.model`; any error
names the file, the line, the key and what is expected. Parsing and validation only: the records and their
defaults are the model's.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sendhost.database_url import database_url_problem
from sendhost.errors import ConfigError
from sendhost.model import (
    BUDGET,
    DEFAULT_GROUP,
    DEFAULT_POOL_NAME,
    PARK_MINUTES,
    POSTMASTER_API_URL,
    POSTMASTER_DAYS,
    POSTMASTER_SCOPE,
    Domain,
    Mailbox,
    PlacementPolicy,
    PoolPolicy,
    PostmasterSettings,
    Seed,
    SenderHost,
)
from sendhost.private_paths import refresh_token_file_problem
from toolkit.inventory_mailboxes import (
    ascii_domain,
    check_mailboxes,
    domain_record,
    field_names,
    mailbox_record,
    oauth_settings,
)
from toolkit.inventory_schema import DOMAIN_RE, Checker
from toolkit.inventory_seeds import placement_policy, seeds
from toolkit.yaml_lines import LineDict, Vaulted, load_yaml_with_lines

SENDER_GROUP = "senders"
GROUP_KEYS = {"hosts", "vars", "children"}
HOST_KEYS = {"sendhost_instance_id", "sendhost_region", "sendhost_primary_ip", "sendhost_pool", "sendhost_subnet",
             "sendhost_interface", "sendhost_mailbox_groups"}
GLOBAL_KEYS = {"sendhost_domains", "sendhost_mailboxes", "sendhost_redis_url", "sendhost_dnsbl", "sendhost_pool_name"}
# The sender agent's settings (see docs/sender.md).
GLOBAL_KEYS |= {"sendhost_database_url", "sendhost_unsubscribe_base_url", "sendhost_unsubscribe_key_file"}
# The provider's spam rate (docs/postmaster.md): how Google Postmaster Tools is read.
GLOBAL_KEYS |= {"sendhost_postmaster"}
POSTMASTER_KEYS = {"oauth", "service_account_key_file", "subject", "domains", "api_url", "days"}
# Placement tests (docs/placement.md): the seeds they send to and when they rest a mailbox.
GLOBAL_KEYS |= {"sendhost_seeds", "sendhost_placement"}
# The value of every EIP's `sendhost:pool` tag: two deployments in one AWS account must use different names, or
# each would take the other's addresses for its own (reconcile, reaper). AWS tag values allow more; this is safe.
POOL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
# A sender host's name becomes an EIP tag, a Redis hash tag, a DNS label (PTR) and a line in files on the host:
# letters, digits, '.', '_' and '-' are safe in all four ('{', '}', '/', spaces and quotes are not).
HOST_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
HOST_NAME_EXPECTED = "a host name: up to 63 letters, digits, '.', '_' or '-', starting alphanumeric"
# Linux interface names: at most 15 bytes (IFNAMSIZ - 1), no '/', ':' or whitespace; kept to what udev and
# netplan produce (eth0, ens5, enp0s3, veth-a1) so the name is safe in netplan YAML and ifupdown files.
INTERFACE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,14}"


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: tuple[SenderHost, ...]
    domains: tuple[Domain, ...]
    mailboxes: tuple[Mailbox, ...]
    redis_url: str | None
    redis_url_line: int
    redis_url_vaulted: bool = False  # encrypted with ansible-vault: sendhost needs the URL from the environment
    dnsbl: tuple[str, ...] = ()
    pool_name: str = DEFAULT_POOL_NAME
    database_url: str | None = None
    database_url_line: int = 0
    unsubscribe_base_url: str | None = None
    unsubscribe_key_file: str | None = None
    postmaster: PostmasterSettings | None = None
    seeds: tuple[Seed, ...] = ()
    placement: PlacementPolicy = field(default_factory=PlacementPolicy)

    def host(self, name: str) -> SenderHost:
        for host in self.hosts:
            if host.name == name:
                return host
        known = ", ".join(h.name for h in self.hosts) or "none"
        raise ConfigError(f"{self.path}: no host {name!r} in group {SENDER_GROUP} (known: {known})")

    def mailbox_groups_of(self, host: SenderHost) -> tuple[str, ...]:
        """The warm-up groups `host` sends for: its sendhost_mailbox_groups, else every group of the mailboxes."""
        if host.mailbox_groups is not None:
            return host.mailbox_groups
        return tuple(sorted({mailbox.group for mailbox in self.mailboxes}))


# Read by the sender_agent role: the index a host installs sendhost from instead of the wheel `sendhost provision`
# builds (provisioning/agent_package.py checks it).
GLOBAL_KEYS |= {"sendhost_package_index_url"}


def load_inventory(path: Path, *, require_refresh_tokens: bool = False) -> Inventory:
    """Parse and validate `path`; raise ConfigError naming file:line and key on the first problem.
    `require_refresh_tokens=True` also requires each oauth2 mailbox's refresh-token file, mode 0600: only on the
    sending host, where it lives (`mailbox check`, `inventory check --tokens`); a controller never holds it, and
    the agent checks each mailbox's own at its start (sender.oauth.keeper.check_credential)."""
    data = load_yaml_with_lines(path)
    check = Checker(path)
    check.require_refresh_tokens = require_refresh_tokens
    if not isinstance(data, LineDict) or not data:
        raise ConfigError(f"{path}:1: an inventory is a mapping of groups (start with `all:`); see the example")
    groups = _collect_groups(check, data)
    global_vars = _merged_vars(groups, "all")
    for key in global_vars:
        if key.startswith("sendhost_") and key not in GLOBAL_KEYS | HOST_KEYS:
            check.fail(global_vars, key, key, f"unknown key; expected one of {', '.join(sorted(GLOBAL_KEYS))}")
    hosts = _sender_hosts(check, groups, global_vars)
    domains = tuple(
        domain_record(check, i, d) for i, d in check.entries(global_vars, "sendhost_domains", "sendhost_domains")
    )
    mailboxes = tuple(
        mailbox_record(check, i, m) for i, m in check.entries(global_vars, "sendhost_mailboxes", "sendhost_mailboxes")
    )
    check_mailboxes(check, global_vars, mailboxes, domains)
    redis_url = check.optional_redis_url(global_vars, "sendhost_redis_url")
    dnsbl = tuple(check.str_list(global_vars, "sendhost_dnsbl", "sendhost_dnsbl", default=[]))
    pool_name = check.string(global_vars, "sendhost_pool_name", "sendhost_pool_name", default=DEFAULT_POOL_NAME,
                             pattern=POOL_NAME_PATTERN,
                             expected="a pool name: up to 63 letters, digits, '.', '_' or '-', starting alphanumeric")
    sender_settings = _sender_settings(check, global_vars)
    postmaster = _postmaster(check, global_vars) if "sendhost_postmaster" in global_vars else None
    sender_settings["seeds"] = seeds(check, global_vars, mailboxes)
    sender_settings["placement"] = placement_policy(check, global_vars)
    return Inventory(
        path=path, hosts=hosts, domains=domains, mailboxes=mailboxes, redis_url=redis_url,
        redis_url_line=check.line_of(global_vars, "sendhost_redis_url"), dnsbl=dnsbl, pool_name=pool_name,
        redis_url_vaulted=isinstance(global_vars.get("sendhost_redis_url"), Vaulted), postmaster=postmaster,
        **sender_settings,
    )


@dataclass
class _Groups:
    """The flattened group tree: each group's mapping and its parent (for variable inheritance)."""

    nodes: dict[str, LineDict]
    parents: dict[str, str | None]
    key_lines: dict[str, int] = field(default_factory=dict)  # the line of each group's own `name:` key


def _collect_groups(check: Checker, data: LineDict) -> _Groups:
    groups = _Groups(nodes={}, parents={})

    def walk(name: str, group: object, holder: LineDict, parent: str | None) -> None:
        if group is None:
            group = LineDict(line=holder.key_lines.get(name, 0))
        if not isinstance(group, LineDict):
            check.fail(holder, name, name, "a group is a mapping with hosts, vars or children")
        assert isinstance(group, LineDict)
        for key in group:
            if key not in GROUP_KEYS:
                expected = ", ".join(sorted(GROUP_KEYS))
                check.fail(group, key, f"{name}.{key}", f"unknown group key; expected one of {expected}")
        check.mapping(group, "vars", f"{name}.vars", default=LineDict())  # fails at its line if not a mapping
        groups.nodes[name] = group
        groups.parents[name] = parent
        groups.key_lines[name] = holder.key_lines.get(name, group.line)
        children = check.mapping(group, "children", f"{name}.children", default=LineDict())
        for child_name, child in children.items():
            walk(child_name, child, children, name)

    for name, group in data.items():
        walk(name, group, data, None if name == "all" else "all")
    return groups


def _merged_vars(groups: _Groups, name: str) -> LineDict:
    group = groups.nodes.get(name)
    if group is None:
        return LineDict()
    own = group.get("vars") or LineDict()
    if not isinstance(own, LineDict):
        raise ConfigError(f"line {group.key_lines.get('vars', group.line)}: {name}.vars must be a mapping of variables")
    parent = groups.parents[name]
    if parent is None:
        return own
    inherited = _merged_vars(groups, parent)
    return LineDict({**inherited, **own}, line=own.line, key_lines={**inherited.key_lines, **own.key_lines})


def _sender_hosts(check: Checker, groups: _Groups, global_vars: LineDict) -> tuple[SenderHost, ...]:
    group = groups.nodes.get(SENDER_GROUP)
    if group is None:
        # Point at the `all:` group, where the missing `children.senders` belongs (line 1 if there is no `all`).
        line = groups.key_lines.get("all") or 1
        raise ConfigError(f"{check.path}:{line}: {SENDER_GROUP}: no group {SENDER_GROUP!r}; "
                          f"add `all.children.{SENDER_GROUP}.hosts` with at least one sender host")
    group_vars = _merged_vars(groups, SENDER_GROUP)
    hosts_node = check.mapping(group, "hosts", f"{SENDER_GROUP}.hosts", default=LineDict())
    # The groups a host may name (read raw: the mailboxes are checked later, each at its own line).
    known_groups = {str(m.get("group") or DEFAULT_GROUP) for m in global_vars.get("sendhost_mailboxes") or []
                    if isinstance(m, LineDict)}
    hosts: list[SenderHost] = []
    host_vars: list[LineDict] = []
    for name, own in hosts_node.items():
        if own is None:
            own = LineDict(line=hosts_node.key_lines[name])
        if not isinstance(own, LineDict):
            check.fail(hosts_node, name, name, "host variables must be a mapping")
        if not re.fullmatch(HOST_NAME_PATTERN, name):
            check.fail(hosts_node, name, f"{SENDER_GROUP}.hosts", f"{name!r} is not {HOST_NAME_EXPECTED}")
        merged = LineDict({**group_vars, **own}, line=own.line or hosts_node.key_lines[name],
                          key_lines={**group_vars.key_lines, **own.key_lines})
        hosts.append(_sender_host(check, name, merged, known_groups))
        host_vars.append(merged)
    _check_unique_addresses(check, hosts, host_vars)
    return tuple(hosts)


def _sender_host(check: Checker, name: str, hv: LineDict, known_groups: set[str]) -> SenderHost:
    for key in hv:
        if key.startswith("sendhost_") and key not in HOST_KEYS | GLOBAL_KEYS:
            check.fail(hv, key, f"{name}.{key}", f"unknown key; expected one of {', '.join(sorted(HOST_KEYS))}")
    primary_ip = check.ip(hv, "sendhost_primary_ip", f"{name}.sendhost_primary_ip")
    instance_id = check.string(hv, "sendhost_instance_id", f"{name}.sendhost_instance_id", pattern=r"i-[0-9a-f]{8,17}",
                               expected="an EC2 instance id like i-0123456789abcdef0")
    region = check.string(hv, "sendhost_region", f"{name}.sendhost_region", pattern=r"[a-z]{2}(-[a-z]+)+-\d",
                          expected="an AWS region like us-east-1")
    ansible_host = check.string(hv, "ansible_host", f"{name}.ansible_host", default=primary_ip)
    subnet = check.optional_network(hv, "sendhost_subnet", f"{name}.sendhost_subnet")
    interface = None  # not set: the default-route interface, which only the host knows (facts, `ip route`)
    if "sendhost_interface" in hv:
        interface = check.string(hv, "sendhost_interface", f"{name}.sendhost_interface", pattern=INTERFACE_PATTERN,
                                 expected="a network interface name like eth0 or ens5 (up to 15 letters, digits, "
                                          "'.', '_' or '-')")
    pool = _pool(check, name, hv)
    if subnet is not None:
        check.ips_in_network(hv, "sendhost_pool", f"{name}.sendhost_pool.private_ips", pool.private_ips, subnet)
    return SenderHost(name=name, ansible_host=ansible_host, instance_id=instance_id, region=region,
                      primary_ip=primary_ip, pool=pool, subnet=subnet, interface=interface,
                      mailbox_groups=_mailbox_groups(check, name, hv, known_groups))


def _mailbox_groups(check: Checker, name: str, hv: LineDict, known_groups: set[str]) -> tuple[str, ...] | None:
    """The host's sendhost_mailbox_groups: each a group some mailbox is in (a typo would leave the host's mailboxes
    out of its Redis user's reach); None when not set (every group)."""
    if "sendhost_mailbox_groups" not in hv:
        return None
    where = f"{name}.sendhost_mailbox_groups"
    listed = check.str_list(hv, "sendhost_mailbox_groups", where)
    for group in listed:
        if group not in known_groups:
            known = ", ".join(sorted(known_groups)) or "none"
            check.fail(hv, "sendhost_mailbox_groups", where, f"no mailbox in sendhost_mailboxes is in group {group!r} "
                       f"(groups: {known}); name a mailbox's group, or leave the key out for every group")
    return tuple(dict.fromkeys(listed))


# A record's inventory keys are its fields; a credential's keys sit in the settings that name it.
POOL_KEYS = field_names(PoolPolicy)


def _pool(check: Checker, host: str, hv: LineDict) -> PoolPolicy:
    where = f"{host}.sendhost_pool"
    pool = check.mapping(hv, "sendhost_pool", where)
    check.known_keys(pool, POOL_KEYS, where)
    slots = check.integer(pool, "slots", f"{where}.slots", minimum=1, maximum=50)
    budget = check.int_list(pool, "budget", f"{where}.budget", default=list(BUDGET))
    if len(budget) != 2 or not 1 <= budget[0] <= budget[1]:
        check.fail(pool, "budget", f"{where}.budget",
                   f"expected [low, high] with 1 <= low <= high, e.g. [{BUDGET[0]}, {BUDGET[1]}]")
    park_minutes = check.integer(pool, "park_minutes", f"{where}.park_minutes", default=PARK_MINUTES, minimum=0,
                                 maximum=1440)
    ptr = check.boolean(pool, "ptr", f"{where}.ptr", default=False)
    ptr_zone = check.string(pool, "ptr_zone", f"{where}.ptr_zone", default="") or None
    private_ips = tuple(check.ip_list(pool, "private_ips", f"{where}.private_ips", default=[]))
    if private_ips and len(private_ips) != slots:
        check.fail(pool, "private_ips", f"{where}.private_ips", f"lists {len(private_ips)} addresses for {slots} slots")
    if ptr and not ptr_zone:
        check.fail(pool, "ptr", f"{where}.ptr", "ptr: true needs ptr_zone (the Route 53 zone for forward A records)")
    if ptr and "_" in host:
        check.fail(pool, "ptr", f"{where}.ptr", f"the forward record {host}-N.{ptr_zone} would not be a valid host "
                   "name ('_' is not allowed in one); rename the host without '_'")
    if ptr_zone:
        ptr_zone = check.domain(pool, "ptr_zone", f"{where}.ptr_zone")
    return PoolPolicy(slots=slots, budget=(budget[0], budget[1]), park_minutes=park_minutes, ptr=ptr,
                      ptr_zone=ptr_zone, private_ips=private_ips)


def _check_unique_addresses(check: Checker, hosts: list[SenderHost], host_vars: list[LineDict]) -> None:
    # Name the key that holds the second use (a primary IP or a slot address), at its own line.
    seen: dict[str, str] = {}
    for host, hv in zip(hosts, host_vars, strict=True):
        uses = [(host.primary_ip, "sendhost_primary_ip", f"{host.name}.sendhost_primary_ip", "primary IP")]
        uses += [(address, "sendhost_pool", f"{host.name}.sendhost_pool.private_ips", "slot address")
                 for address in host.pool.private_ips]
        for address, key, where, role in uses:
            if address in seen:
                node = hv[key] if key == "sendhost_pool" else hv
                key = "private_ips" if key == "sendhost_pool" else key
                check.fail(node, key, where, f"{role} {address} is already used by {seen[address]}; "
                           "every host and slot needs its own address")
            seen[address] = f"{host.name} ({role})"


def _sender_settings(check: Checker, global_vars: LineDict) -> dict[str, Any]:
    """The sender agent's global settings: the ledger's database URL and the unsubscribe endpoint."""
    database_url = check.string(global_vars, "sendhost_database_url", "sendhost_database_url", default="") or None
    if database_url is not None and (problem := database_url_problem(database_url)):
        check.fail(global_vars, "sendhost_database_url", "sendhost_database_url", problem)
    base_url = check.string(global_vars, "sendhost_unsubscribe_base_url", "sendhost_unsubscribe_base_url",
                            default="") or None
    if base_url is not None and not base_url.startswith("https://"):
        check.fail(global_vars, "sendhost_unsubscribe_base_url", "sendhost_unsubscribe_base_url",
                   "expected an https:// URL (RFC 8058 one-click needs https), e.g. https://u.example.com")
    key_file = check.string(global_vars, "sendhost_unsubscribe_key_file", "sendhost_unsubscribe_key_file",
                            default="") or None
    return {"database_url": database_url, "database_url_line": check.line_of(global_vars, "sendhost_database_url"),
            "unsubscribe_base_url": base_url.rstrip("/") if base_url else None, "unsubscribe_key_file": key_file}


def _postmaster(check: Checker, global_vars: LineDict) -> PostmasterSettings:
    """`sendhost_postmaster`: how Google Postmaster Tools is read, as an OAuth grant (an oauth block like a mailbox's,
    its scope the read-only Postmaster one) or a service account's key file; exactly one of the two."""
    where = "sendhost_postmaster"
    block = check.mapping(global_vars, "sendhost_postmaster", where)
    check.known_keys(block, POSTMASTER_KEYS, where)
    key_file = check.string(block, "service_account_key_file", f"{where}.service_account_key_file", default="") or None
    if ("oauth" in block) == (key_file is not None):
        check.fail(block, "oauth" if "oauth" in block else "service_account_key_file", where,
                   "give exactly one of oauth: {provider: google, client_id: ..., refresh_token_file: ...} or "
                   "service_account_key_file: PATH")
    oauth = None
    if "oauth" in block:
        oauth_block = check.mapping(block, "oauth", f"{where}.oauth")
        needs_token = check.require_refresh_tokens
        check.require_refresh_tokens = False  # its fix is `postmaster authorize`, checked below
        try:
            oauth = oauth_settings(check, where, block, "postmaster", None)
        finally:
            check.require_refresh_tokens = needs_token
        if oauth.provider != "google":
            check.fail(oauth_block, "provider", f"{where}.oauth.provider", "Postmaster Tools is Google's: write "
                       "provider: google")
        if "scope" not in oauth_block:
            oauth = dataclasses.replace(oauth, scope=POSTMASTER_SCOPE)
        if needs_token and (problem := refresh_token_file_problem(oauth.refresh_token_file)):
            check.fail(oauth_block, "refresh_token_file", f"{where}.oauth.refresh_token_file",
                       f"{problem}; run sendhost postmaster authorize")
    subject = check.string(block, "subject", f"{where}.subject", default="") or None
    if subject is not None and key_file is None:
        check.fail(block, "subject", f"{where}.subject", "subject is a service account setting (the user it acts "
                   "for); remove it, or use service_account_key_file")
    domains = []
    for index, name in enumerate(check.str_list(block, "domains", f"{where}.domains", default=[])):
        ascii_name = ascii_domain(name)
        if not DOMAIN_RE.match(ascii_name):
            check.fail(block, "domains", f"{where}.domains[{index}]", f"{name!r} is not a domain name like "
                       "example.com")
        domains.append(ascii_name)
    api_url = check.string(block, "api_url", f"{where}.api_url", default=POSTMASTER_API_URL).rstrip("/")
    if not api_url.startswith(("https://", "http://127.", "http://localhost")):
        check.fail(block, "api_url", f"{where}.api_url", f"{api_url!r} is not an https:// URL")
    days = check.integer(block, "days", f"{where}.days", default=POSTMASTER_DAYS, minimum=1)
    return PostmasterSettings(oauth=oauth, service_account_key_file=key_file, subject=subject, domains=tuple(domains),
                              api_url=api_url, days=days)
