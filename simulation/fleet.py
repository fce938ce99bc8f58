"""A fleet in the simulation (issue 30): the inventory scaled to N hosts and M mailboxes on the same embedded
services, and what the run used of those services.

    inventory = scale_inventory(inventory, FleetSize(hosts=50, mailboxes=400))
    meter = ConnectionMeter(redis_client, ledger_url)   # the engine samples it with the charts' series

The inventory's own hosts and mailboxes come first (the first N or M of them when fewer are asked). Each generated
host copies the pool policy of the inventory's hosts in turn (its slots, budget, parking, PTR) on a /24 of its own;
each generated mailbox copies the group, time zone and start date of the inventory's mailboxes in turn and goes to
the domain that has the fewest mailboxes so far. So the same options give the same fleet, whatever the seed, and
the run starts on the same day as the inventory's own (the latest mailbox start).
"""

from __future__ import annotations

import contextlib
import ipaddress
import statistics
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from sendhost.model import Mailbox, SenderHost
from simulation.errors import SimulationConfigError
from simulation.model import SimInventory

# Generated hosts sit on 10.100.0.0/24, 10.100.1.0/24, ... (a /24 each, skipping any an inventory host uses): a
# /16 holds 256, and more hosts than that on one embedded Redis and PostgreSQL is not a simulation anyone waits for.
GENERATED_NETWORK = ipaddress.IPv4Network("10.100.0.0/16")
MAX_HOSTS = 250
# A domain's reputation is shared by all its mailboxes, and the simulation audits only the inventory's domains (their
# zone files): past this many mailboxes per domain a real fleet adds domains, and so must the inventory.
MAX_MAILBOXES_PER_DOMAIN = 250
TOP_HOSTS = 5  # the busiest hosts the summary names; the rest are folded into min/median/max


@dataclass(frozen=True)
class FleetSize:
    """How many hosts and mailboxes to run (None: the inventory's own)."""

    hosts: int | None = None
    mailboxes: int | None = None


def check_size(inventory: SimInventory, size: FleetSize) -> None:
    """Raise SimulationConfigError naming the first option the inventory cannot carry."""
    if size.hosts is not None and not 1 <= size.hosts <= MAX_HOSTS:
        raise SimulationConfigError(f"--hosts {size.hosts}: simulate 1 to {MAX_HOSTS} hosts, e.g. --hosts 50")
    if size.mailboxes is None:
        return
    domains = _domains(inventory)
    carried = len(domains) * MAX_MAILBOXES_PER_DOMAIN
    if size.mailboxes < 1:
        raise SimulationConfigError(f"--mailboxes {size.mailboxes}: simulate at least 1 mailbox, e.g. "
                                    f"--mailboxes 400")
    if size.mailboxes > carried:
        raise SimulationConfigError(
            f"--mailboxes {size.mailboxes}: the inventory's {len(domains)} domain{'s' if len(domains) != 1 else ''} "
            f"carry at most {carried} ({MAX_MAILBOXES_PER_DOMAIN} each); pass --mailboxes {carried} or fewer, or "
            f"add domains to sendhost_domains")


def scale_inventory(inventory: SimInventory, size: FleetSize) -> SimInventory:
    """`inventory` with `size.hosts` hosts and `size.mailboxes` mailboxes (see the module docstring)."""
    check_size(inventory, size)
    hosts = inventory.hosts if size.hosts is None else _hosts(inventory.hosts, size.hosts)
    mailboxes = inventory.mailboxes if size.mailboxes is None else _mailboxes(inventory, size.mailboxes)
    return replace(inventory, hosts=hosts, mailboxes=mailboxes)


def _domains(inventory: SimInventory) -> tuple[str, ...]:
    """The domains mailboxes may be put on: the inventory's sending domains, else its mailboxes' own."""
    names = [domain.name for domain in inventory.domains] or [mailbox.domain for mailbox in inventory.mailboxes]
    return tuple(dict.fromkeys(name.lower() for name in names))


def _hosts(own: tuple[SenderHost, ...], count: int) -> tuple[SenderHost, ...]:
    if count <= len(own):
        return own[:count]
    taken = {host.name for host in own}
    used = [_network(host) for host in own]
    subnets = (net for net in GENERATED_NETWORK.subnets(new_prefix=24) if not any(net.overlaps(u) for u in used))
    generated = []
    for number in range(len(own) + 1, count + 1):
        template = own[(number - 1) % len(own)]
        name = next(f"fleet-{number:03d}{suffix}" for suffix in ("", "-a", "-b", "-c")
                    if f"fleet-{number:03d}{suffix}" not in taken)
        subnet = next(subnets)
        primary = str(subnet.network_address + 10)
        generated.append(replace(template, name=name, instance_id=f"i-{0xf1ee7000000000000 + number:017x}",
                                 primary_ip=primary, ansible_host=primary, subnet=str(subnet),
                                 pool=replace(template.pool, private_ips=())))
    return own + tuple(generated)


def _network(host: SenderHost) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(host.subnet or f"{host.primary_ip}/24", strict=False)


def _mailboxes(inventory: SimInventory, count: int) -> tuple[Mailbox, ...]:
    own = inventory.mailboxes
    if count <= len(own):
        return own[:count]
    taken = {mailbox.address.lower() for mailbox in own}
    load = Counter({domain: 0 for domain in _domains(inventory)})
    load.update(mailbox.domain.lower() for mailbox in own)
    generated: list[Mailbox] = []
    number = 0
    while len(own) + len(generated) < count:
        number += 1
        template = own[len(generated) % len(own)]
        domain = min(load, key=lambda name: load[name])  # the first of the least loaded, in the inventory's order
        address = f"fleet{number:04d}@{domain}"
        if address in taken:
            continue
        load[domain] += 1
        generated.append(Mailbox(address, domain, template.start, template.timezone, template.group,
                                 template.min_gap_s, template.jitter_s))
    return own + tuple(generated)


# --- what the run used -------------------------------------------------------------------------------------------


@dataclass
class ConnectionUse:
    """The connections the embedded services saw, sampled during the run: the most at once, and their limits."""

    postgres_peak: int = 0  # client backends in pg_stat_activity, the meter's own left out
    postgres_max: int = 0  # the server's max_connections
    redis_peak: int = 0  # INFO clients: connected_clients
    redis_max: int = 0  # CONFIG GET maxclients
    samples: int = 0
    # Read once at the end: the longest a sent row waited between its claim and its attempt's start. A row claimed
    # ahead (the agent's record-and-claim) waits for its worker's next look: seconds, not the hours it once did.
    claim_wait_max_s: float = 0.0

    def to_json(self) -> dict[str, float]:
        return dict(vars(self))


# The client backends but the meter's own, as pg_stat_activity lists them.
PEAK_QUERY = ("SELECT count(*) FROM pg_stat_get_activity(NULL) WHERE backend_type = 'client backend' "
              "AND pid <> pg_backend_pid()")


class ConnectionMeter:
    """Reads pg_stat_activity and Redis INFO clients on its own PostgreSQL connection and the run's Redis client
    (whose pooled connection is one the run holds anyway), keeping the peaks in `use`."""

    def __init__(self, redis_client: Any, ledger_url: str) -> None:
        from sender.ledger import connection as db

        self._redis = redis_client
        self._conn = db.connect(ledger_url)
        self._conn.autocommit = True
        row = self._conn.execute("SHOW max_connections").fetchone()
        self.use = ConnectionUse(postgres_max=int(row[0]) if row else 0,
                                 redis_max=int(redis_client.config_get("maxclients")["maxclients"]))

    def sample(self) -> None:
        # The function under the view pg_stat_activity, whose joins (to the database and role names) are outer and
        # change no count: the same rows, at a quarter of the server's CPU, at every one of a run's 4,000 samples.
        row = self._conn.execute(PEAK_QUERY).fetchone()
        self.use.postgres_peak = max(self.use.postgres_peak, int(row[0]) if row else 0)
        self.use.redis_peak = max(self.use.redis_peak, int(self._redis.info("clients")["connected_clients"]))
        self.use.samples += 1

    def finish(self) -> None:
        """The run's last reading (see ConnectionUse.claim_wait_max_s)."""
        row = self._conn.execute("SELECT extract(epoch FROM max(attempt_started_at - claimed_at)) FROM sender_emails "
                                 "WHERE attempt_started_at IS NOT NULL").fetchone()
        self.use.claim_wait_max_s = float(row[0]) if row and row[0] is not None else 0.0

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a connection the server already dropped changes nothing
            self._conn.close()


@dataclass(frozen=True)
class FleetSection:
    """The summary's fleet section: the fleet's size, sends per host folded, and the connections used."""

    hosts: int
    slots: int
    mailboxes: int
    workers: int  # sender workers in the run: hosts x workers per host
    sends: int  # the sum of per_host
    sends_min: int
    sends_median: float
    sends_max: int
    idle_hosts: int  # hosts that sent nothing
    top: list[tuple[str, int]]  # the busiest hosts, most sends first (ties in the inventory's order)
    per_host: dict[str, int]  # every host's sends, in the inventory's order (JSON only)
    connections: ConnectionUse = field(default_factory=ConnectionUse)

    def to_json(self) -> dict[str, Any]:
        return {"hosts": self.hosts, "slots": self.slots, "mailboxes": self.mailboxes, "workers": self.workers,
                "sends_per_host": {"total": self.sends, "min": self.sends_min, "median": self.sends_median,
                                   "max": self.sends_max, "idle_hosts": self.idle_hosts,
                                   "top": [list(entry) for entry in self.top], "per_host": self.per_host},
                "connections": self.connections.to_json()}


def fleet_section(inventory: SimInventory, host_of_sends: list[str], workers: int,
                  connections: ConnectionUse) -> FleetSection:
    """The section from the hosts of the run's sends (one entry per send, from the event log)."""
    counted = Counter(host_of_sends)
    per_host = {host.name: counted.get(host.name, 0) for host in inventory.hosts}
    values = list(per_host.values())
    top = sorted(per_host.items(), key=lambda item: -item[1])[:TOP_HOSTS]  # ties: in the inventory's order
    return FleetSection(
        hosts=len(inventory.hosts), slots=sum(host.pool.slots for host in inventory.hosts),
        mailboxes=len(inventory.mailboxes), workers=workers, sends=sum(values), sends_min=min(values),
        sends_median=statistics.median(values), sends_max=max(values),
        idle_hosts=sum(1 for value in values if value == 0), top=top, per_host=per_host, connections=connections)
