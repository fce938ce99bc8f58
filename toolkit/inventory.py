"""The one inventory: an Ansible YAML inventory whose `sendhost_*` variables are sendhost's configuration.

`load_inventory` validates it against the schema below and returns the records of `sendhost.model`; any error
names the file, the line, the key and what is expected. Parsing and validation only: the records and their
defaults are the model's.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from sendhost.database_url import database_url_problem
from sendhost.errors import ConfigError
from sendhost.model import (
    AUTH_METHODS,
    AUTHSERV_ID_PRESETS,
    BUDGET,
    DEFAULT_DMARC_FLOOR,
    DEFAULT_GROUP,
    DEFAULT_OAUTH_TENANT,
    DEFAULT_POOL_NAME,
    DEFAULT_SENDING_MODE,
    DEFAULT_TIMEZONE,
    DMARC_FLOORS,
    IMAP_FOLDER,
    IMAP_PORT,
    IMAP_SECURITY,
    JITTER_S,
    MIN_GAP_S,
    OAUTH_PROVIDERS,
    OAUTH_SCOPES,
    OAUTH_TOKEN_URLS,
    PARK_MINUTES,
    POSTMASTER_API_URL,
    POSTMASTER_DAYS,
    POSTMASTER_SCOPE,
    SENDING_MODES,
    SMTP_PORT,
    SMTP_SECURITY,
    Credential,
    Domain,
    ImapSettings,
    Mailbox,
    OAuthSettings,
    PlacementPolicy,
    PoolPolicy,
    PostmasterSettings,
    Seed,
    SenderHost,
    Submission,
)
from sendhost.private_paths import refresh_token_file_problem
from sendhost.providers import PROVIDER_PRESETS, PROVIDERS, ProviderPreset
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
    domains = tuple(_domain(check, i, d) for i, d in check.entries(global_vars, "sendhost_domains", "sendhost_domains"))
    mailboxes = tuple(
        _mailbox(check, i, m) for i, m in check.entries(global_vars, "sendhost_mailboxes", "sendhost_mailboxes")
    )
    _check_mailboxes(check, global_vars, mailboxes, domains)
    redis_url = check.optional_redis_url(global_vars, "sendhost_redis_url")
    dnsbl = tuple(check.str_list(global_vars, "sendhost_dnsbl", "sendhost_dnsbl", default=[]))
    pool_name = check.string(global_vars, "sendhost_pool_name", "sendhost_pool_name", default=DEFAULT_POOL_NAME,
                             pattern=POOL_NAME_PATTERN,
                             expected="a pool name: up to 63 letters, digits, '.', '_' or '-', starting alphanumeric")
    sender_settings = _sender_settings(check, global_vars)
    postmaster = _postmaster(check, global_vars) if "sendhost_postmaster" in global_vars else None
    sender_settings["seeds"] = seeds(check, global_vars, mailboxes, oauth=_oauth, authserv_id=_authserv_id)
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


def _field_names(record: type) -> set[str]:
    return {f.name for f in fields(record)}


# A record's inventory keys are its fields; a credential's keys sit in the settings that name it.
POOL_KEYS = _field_names(PoolPolicy)


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


DOMAIN_KEYS = _field_names(Domain) - {"line"}
# A mailbox's auth and token_file are its smtp credential's (the agent's); its imap settings are the inbox reader's.
MAILBOX_KEYS = _field_names(Mailbox) | {"auth", "token_file"}


def _domain(check: Checker, index: int, node: object) -> Domain:
    where = f"sendhost_domains[{index}]"
    entry = check.entry(node, where)
    check.known_keys(entry, DOMAIN_KEYS, where)
    return Domain(
        name=check.domain(entry, "name", f"{where}.name"),
        dkim_selectors=tuple(check.str_list(entry, "dkim_selectors", f"{where}.dkim_selectors", default=[])),
        envelope_domain=check.domain(entry, "envelope_domain", f"{where}.envelope_domain", default="") or None,
        spf_includes=tuple(check.str_list(entry, "spf_includes", f"{where}.spf_includes", default=[])),
        dmarc_floor=check.choice(entry, "dmarc_floor", f"{where}.dmarc_floor", DMARC_FLOORS,
                                 default=DEFAULT_DMARC_FLOOR),
        sending_mode=check.choice(entry, "sending_mode", f"{where}.sending_mode", SENDING_MODES,
                                  default=DEFAULT_SENDING_MODE),
        line=check.line_of(entry, "name"),
    )


def _mailbox(check: Checker, index: int, node: object) -> Mailbox:
    where = f"sendhost_mailboxes[{index}]"
    entry = check.entry(node, where)
    check.known_keys(entry, MAILBOX_KEYS, where)
    address = check.email(entry, "address", f"{where}.address")
    domain = check.domain(entry, "domain", f"{where}.domain")
    # The mailbox's `domain` picks the DNS audited for it and the warm-up group it sends in; a From address in
    # another domain would be audited against the wrong records, so the two must agree.
    address_domain = _ascii_domain(address.rpartition("@")[2])
    if address_domain != domain:
        check.fail(entry, "domain", f"{where}.domain",
                   f"mailbox {address} is in domain {address_domain}, not {domain}; "
                   f"set domain: {address_domain} or fix the address")
    return Mailbox(
        address=address,
        domain=domain,
        start=check.iso_date(entry, "start", f"{where}.start"),
        timezone=check.timezone(entry, "timezone", f"{where}.timezone", default=DEFAULT_TIMEZONE),
        group=check.string(entry, "group", f"{where}.group", default=DEFAULT_GROUP),
        **_mailbox_sending(check, where, entry, address),
    )


def _ascii_domain(name: str) -> str:
    try:
        return name.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        return name.rstrip(".").lower()


def _check_mailboxes(check: Checker, global_vars: LineDict, mailboxes: tuple[Mailbox, ...],
                     domains: tuple[Domain, ...]) -> None:
    names = {d.name for d in domains}
    seen: set[str] = set()
    for mailbox in mailboxes:
        if mailbox.address in seen:
            check.fail(global_vars, "sendhost_mailboxes", "sendhost_mailboxes",
                       f"mailbox {mailbox.address} is listed twice; keep one")
        seen.add(mailbox.address)
        if names and mailbox.domain not in names:
            check.fail(global_vars, "sendhost_mailboxes", "sendhost_mailboxes",
                       f"mailbox {mailbox.address} names domain {mailbox.domain}, which is not in sendhost_domains")


CREDENTIAL_KEYS = {"password_file", "password_env"}
SMTP_KEYS = _field_names(Submission) - {"credential"} | CREDENTIAL_KEYS | {"auth", "oauth"}
OAUTH_KEYS = _field_names(OAuthSettings)


def is_loopback_host(host: str) -> bool:
    """Exactly `localhost` or an IP literal in 127.0.0.0/8 or ::1. A prefix test let `localhost.mail.example.com`
    and `127.0.0.1.relay.example.net` (names anyone can register) take the password in clear."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _mailbox_sending(check: Checker, where: str, entry: LineDict, address: str) -> dict[str, Any]:
    """The sender agent's settings of one mailbox: gap, jitter, submission server and authentication."""
    gap = check.number(entry, "min_gap_s", f"{where}.min_gap_s", default=MIN_GAP_S, minimum=0.0)
    jitter = check.number_pair(entry, "jitter_s", f"{where}.jitter_s", default=JITTER_S)
    auth = check.choice(entry, "auth", f"{where}.auth", AUTH_METHODS, default="password")
    token_file = check.string(entry, "token_file", f"{where}.token_file", default="") or None
    if auth == "xoauth2" and token_file is None:
        check.fail(entry, "auth", f"{where}.auth", "auth: xoauth2 needs token_file (a file holding the access token)")
    smtp = None
    if "smtp" in entry:
        node = check.mapping(entry, "smtp", f"{where}.smtp")
        if "password" in node:
            check.fail(node, "password", f"{where}.smtp.password", "never put a password in the inventory; use "
                       "password_file (a 0600 file) or password_env")
        check.known_keys(node, SMTP_KEYS, f"{where}.smtp")
        preset = None
        if "provider" in node:
            preset = PROVIDER_PRESETS[check.choice(node, "provider", f"{where}.smtp.provider", PROVIDERS)]
        security = check.choice(node, "security", f"{where}.smtp.security", SMTP_SECURITY,
                                default=preset.smtp_security if preset else "starttls")
        host = check.string(node, "host", f"{where}.smtp.host", **({"default": preset.smtp_host} if preset else {}))
        if security == "none" and not is_loopback_host(host):
            check.fail(node, "security", f"{where}.smtp.security",
                       f"security: none sends the password in clear; allowed only for a loopback host, not {host!r}; "
                       "use localhost, 127.0.0.1 or ::1, or security: starttls")
        port = check.integer(node, "port", f"{where}.smtp.port",
                             default=preset.smtp_port if preset and security == preset.smtp_security
                             else SMTP_PORT[security], minimum=1, maximum=65535)
        limit = (check.integer(node, "daily_limit", f"{where}.smtp.daily_limit", minimum=1) if "daily_limit" in node
                 else preset.daily_limit if preset else None)
        floor = check.number(node, "min_gap_s", f"{where}.smtp.min_gap_s",
                             default=preset.min_gap_s if preset else 0.0, minimum=0.0)
        password_file = check.string(node, "password_file", f"{where}.smtp.password_file", default="") or None
        password_env = check.secret_env(node, "password_env", f"{where}.smtp.password_env")
        if "auth" in node:
            smtp_auth = check.choice(node, "auth", f"{where}.smtp.auth", AUTH_METHODS)
            if "auth" in entry and smtp_auth != auth:
                check.fail(node, "auth", f"{where}.smtp.auth", f"the mailbox says auth: {auth}; keep one of the two")
            auth = smtp_auth
        if auth == "password" and (password_file is None) == (password_env is None):
            check.fail(node, "host", f"{where}.smtp", "name exactly one of password_file or password_env")
        oauth = _oauth(check, f"{where}.smtp", node, address, preset) if auth == "oauth2" else None
        if oauth is None and "oauth" in node:
            check.fail(node, "oauth", f"{where}.smtp.oauth", "an oauth block needs auth: oauth2 beside it")
        credential = Credential(address, "smtp", auth, password_file=password_file, password_env=password_env,
                                token_file=token_file, oauth=oauth)
        smtp = Submission(host=host, port=port, security=security,
                          username=check.string(node, "username", f"{where}.smtp.username"), credential=credential,
                          ca_file=check.string(node, "ca_file", f"{where}.smtp.ca_file", default="") or None,
                          provider=preset.name if preset else None, daily_limit=limit, min_gap_s=floor)
    imap = _mailbox_imap(check, where, entry, address, smtp)
    return {"min_gap_s": gap, "jitter_s": jitter, "smtp": smtp, "imap": imap}


def _oauth(check: Checker, where: str, node: LineDict, address: str, preset: ProviderPreset | None) -> OAuthSettings:
    """A mailbox's `smtp.oauth` block: its provider (default: the smtp preset's), the provider's implied token URL
    and scope, the refresh token's file present and private (the agent refreshes with it; `sendhost mailbox
    authorize` writes it)."""
    if "oauth" not in node:
        check.fail(node, "auth", f"{where}.auth", "auth: oauth2 needs an oauth block: {provider: google|microsoft|"
                   "generic, client_id: ..., refresh_token_file: ...}")
    block = check.mapping(node, "oauth", f"{where}.oauth")
    where = f"{where}.oauth"
    check.known_keys(block, OAUTH_KEYS, where)
    provider = check.choice(block, "provider", f"{where}.provider", OAUTH_PROVIDERS,
                            **({"default": preset.name} if preset else {}))
    if preset is not None and provider != preset.name:
        # The preset's server only takes its own provider's tokens: a mismatch can never log in.
        check.fail(block, "provider", f"{where}.provider", f"smtp.provider is {preset.name}: write provider: "
                   f"{preset.name} here or leave it out (it follows smtp.provider)")
    client_id = check.string(block, "client_id", f"{where}.client_id", default="")
    if not client_id:
        check.fail(block, "provider", f"{where}.client_id", "name client_id (the OAuth client registered with "
                   f"{provider} for sendhost)")
    tenant = check.string(block, "tenant", f"{where}.tenant", default="") or None
    if tenant is not None and provider != "microsoft":
        check.fail(block, "tenant", f"{where}.tenant", "tenant is a Microsoft setting; remove it")
    implied_url = OAUTH_TOKEN_URLS.get(provider, "").replace("{tenant}", tenant or DEFAULT_OAUTH_TENANT)
    token_url = check.string(block, "token_url", f"{where}.token_url", default=implied_url)
    scope = check.string(block, "scope", f"{where}.scope", default=OAUTH_SCOPES.get(provider, ""))
    for key, value in (("token_url", token_url), ("scope", scope)):
        if not value:
            check.fail(block, "provider", f"{where}.{key}", f"provider: generic needs {key}")
    if not token_url.startswith(("https://", "http://127.", "http://localhost")):
        check.fail(block, "token_url", f"{where}.token_url", f"{token_url!r} is not an https:// URL")
    refresh_token_file = check.string(block, "refresh_token_file", f"{where}.refresh_token_file")
    if check.require_refresh_tokens and (problem := refresh_token_file_problem(refresh_token_file)):
        check.fail(block, "refresh_token_file", f"{where}.refresh_token_file",
                   f"{problem}; run sendhost mailbox authorize {address}")
    return OAuthSettings(provider=provider, client_id=client_id, token_url=token_url, scope=scope,
                         refresh_token_file=refresh_token_file, tenant=tenant,
                         device_authorization_url=check.string(block, "device_authorization_url",
                                                               f"{where}.device_authorization_url", default="") or None,
                         authorization_url=check.string(block, "authorization_url", f"{where}.authorization_url",
                                                        default="") or None,
                         client_secret_env=check.secret_env(block, "client_secret_env", f"{where}.client_secret_env"))


IMAP_KEYS = _field_names(ImapSettings) - {"credential"} | CREDENTIAL_KEYS | {"auth"}
IMAP_AUTH_METHODS = ("password", "oauth2")


def _mailbox_imap(check: Checker, where: str, entry: LineDict, address: str,
                  smtp: Submission | None) -> ImapSettings | None:
    """The inbox reader's settings of one mailbox; username and secret (an OAuth grant too) default to its smtp
    ones."""
    if "imap" not in entry:
        return None
    node = check.mapping(entry, "imap", f"{where}.imap")
    if "password" in node:
        check.fail(node, "password", f"{where}.imap.password", "never put a password in the inventory; use "
                   "password_file (a 0600 file) or password_env")
    check.known_keys(node, IMAP_KEYS, f"{where}.imap")
    password_file = check.string(node, "password_file", f"{where}.imap.password_file", default="") or None
    password_env = check.secret_env(node, "password_env", f"{where}.imap.password_env")
    smtp_oauth = smtp.credential.oauth if smtp is not None else None
    # An OAuth mailbox's inbox logs in with the same grant (its scope covers both) unless it names a password.
    auth = check.choice(node, "auth", f"{where}.imap.auth", IMAP_AUTH_METHODS, default="oauth2" if (
        smtp_oauth is not None and password_file is None and password_env is None) else "password")
    if auth == "oauth2":
        if smtp_oauth is None:
            check.fail(node, "auth", f"{where}.imap.auth", "imap auth: oauth2 uses the smtp oauth block; give smtp "
                       "auth: oauth2 and an oauth block")
        if password_file is not None or password_env is not None:
            check.fail(node, "auth", f"{where}.imap.auth", "auth: oauth2 takes no password; remove password_file "
                       "and password_env")
        return _imap_settings(check, node, where, smtp,
                              Credential(address, "imap", "oauth2", oauth=smtp_oauth))
    if password_file is not None and password_env is not None:
        check.fail(node, "password_env", f"{where}.imap", "name at most one of password_file or password_env")
    if password_file is None and password_env is None:
        if smtp is None or (smtp.credential.password_file is None and smtp.credential.password_env is None):
            check.fail(node, "host", f"{where}.imap", "name password_file or password_env (there is no smtp "
                       "secret to default to)")
        assert smtp is not None
        password_file, password_env = smtp.credential.password_file, smtp.credential.password_env
    return _imap_settings(check, node, where, smtp,
                          Credential(address, "imap", password_file=password_file, password_env=password_env))


def _imap_settings(check: Checker, node: LineDict, where: str, smtp: Submission | None,
                   credential: Credential) -> ImapSettings:
    """Where the inbox is and how it is read, whatever `credential` logs in with."""
    security = check.choice(node, "security", f"{where}.imap.security", IMAP_SECURITY, default="tls")
    port = check.integer(node, "port", f"{where}.imap.port", default=IMAP_PORT[security], minimum=1, maximum=65535)
    username = check.string(node, "username", f"{where}.imap.username", default="") or (
        smtp.username if smtp is not None else "")
    if not username:
        check.fail(node, "host", f"{where}.imap", "name username (there is no smtp username to default to)")
    preset = PROVIDER_PRESETS.get(smtp.provider) if smtp is not None and smtp.provider else None
    host = check.string(node, "host", f"{where}.imap.host", **({"default": preset.imap_host} if preset else {}))
    return ImapSettings(host=host, port=port, security=security, username=username, credential=credential,
                        ca_file=check.string(node, "ca_file", f"{where}.imap.ca_file", default="") or (
                            smtp.ca_file if smtp is not None else None),
                        folder=check.string(node, "folder", f"{where}.imap.folder", default=IMAP_FOLDER),
                        sent_folder=check.string(node, "sent_folder", f"{where}.imap.sent_folder", default="") or None,
                        authserv_id=_authserv_id(check, node, f"{where}.imap.authserv_id", host))


# RFC 8601's authserv-id is a `value` (a token or a quoted string); providers use a host name. No spaces, no `;`.
_AUTHSERV_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")


def _authserv_id(check: Checker, node: LineDict, where: str, host: str) -> str | None:
    """The provider's Authentication-Results id: as written, else its preset by IMAP host, else None."""
    value = check.string(node, "authserv_id", where, default="")
    if not value:
        return AUTHSERV_ID_PRESETS.get(host.lower().rstrip("."))
    if not _AUTHSERV_ID.match(value):
        check.fail(node, "authserv_id", where, f"{value!r} is not an authserv-id; write the name the provider puts "
                   "first in its Authentication-Results headers, like mx.google.com")
    return value


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
            oauth = _oauth(check, where, block, "postmaster", None)
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
        ascii_name = _ascii_domain(name)
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
