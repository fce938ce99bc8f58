"""`host verify`: prove over SSH that each slot address is bound and presents the right source address.

Per slot: the address is bound on the host's interface (the inventory's, else the default-route one, `ip -j route`);
a TCP connection bound to it reaches the probe, which answers with the source address it saw; that address is the
one the slot should present (its Elastic IP with `--expect-public`). Then time sync.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from provisioning.egress import EgressCheck, check_submission_egress
from provisioning.errors import ProvisionConfigError, ProvisionFailed
from provisioning.plan import ProvisionPlan
from provisioning.ssh import CommandResult

# Runs on the sender host: connect from SRC to the probe, print what the probe saw.
_PROBE_CLIENT = """
import socket, sys
host, port, source = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    with socket.create_connection((host, port), timeout=5, source_address=(source, 0)) as conn:
        data = b""
        while not data.endswith(b"\\n") and len(data) < 200:
            chunk = conn.recv(200)
            if not chunk:
                break
            data += chunk
except OSError as exc:
    print("error", exc)
    sys.exit(3)
print("seen", data.decode(errors="replace").strip())
"""
NOT_FOUND = 127


class RemoteShell(Protocol):
    def run(self, command: str, timeout: float = ...) -> CommandResult: ...


@dataclass(frozen=True)
class SlotCheck:
    slot: int
    address: str
    status: str  # ok | failed
    bound_on: str | None  # interface the address is bound on, if any
    seen: str | None  # source address the probe reported
    detail: str


@dataclass(frozen=True)
class NtpCheck:
    status: str  # synchronised | not synchronised | unknown
    source: str | None  # timedatectl | chronyc | ntpstat

    @property
    def ok(self) -> bool:
        """Unknown (no tool to ask) is reported, not failed; only a known-unsynchronised clock fails."""
        return self.status != "not synchronised"


@dataclass(frozen=True)
class VerifyReport:
    host: str
    interface: str  # where the slots must be bound: the inventory's, else the host's default-route interface
    slots: tuple[SlotCheck, ...]
    ntp: NtpCheck
    egress: tuple[EgressCheck, ...] = ()  # outbound submission to the mailboxes' servers (provisioning/egress.py)

    @property
    def ok(self) -> bool:
        return all(s.status == "ok" for s in self.slots) and self.ntp.ok and all(e.ok for e in self.egress)


def verify_host(session: RemoteShell, plan: ProvisionPlan, probe: tuple[str, int] | None = None,
                expected_seen: Mapping[str, str] | None = None,
                submission: Sequence[tuple[str, int]] = ()) -> VerifyReport:
    """Check every slot in `plan` over `session`. `expected_seen` maps a slot address to the address the probe
    should see (its Elastic IP when the probe is outside the VPC); by default the slot address itself.
    `submission`: the (host, port) of each mailbox's submission server, to be reached from the host."""
    interface = plan.interface or default_route_interface(session, plan.name)
    bound = bound_addresses(session)
    slots = tuple(
        _check_slot(session, index, address, interface, bound, probe, (expected_seen or {}).get(address, address))
        for index, address in enumerate(plan.slot_addresses)
    )
    return VerifyReport(host=plan.name, interface=interface, slots=slots, ntp=ntp_status(session),
                        egress=check_submission_egress(session, submission))


def default_route_interface(session: RemoteShell, host: str) -> str:
    """The interface the host's IPv4 default route leaves through (`ens5` on Nitro instances, `eth0` on Xen ones),
    as the provisioning role takes it from facts; a host without one must name it in the inventory."""
    result = session.run("ip -j -4 route show default")
    if result.rc != 0:
        raise ProvisionFailed(f"`ip -j -4 route show default` failed on the host: {result.stderr.strip() or result.rc}")
    try:
        routes = json.loads(result.stdout or "[]")
    except ValueError:
        raise ProvisionFailed(f"`ip -j -4 route show default` on the host printed no JSON: {result.stdout[:80]!r}") \
            from None
    devices = [route["dev"] for route in routes if isinstance(route, dict) and route.get("dev")]
    if not devices:
        raise ProvisionConfigError(
            f"{host}: the host has no default route to tell its interface: set {host}.sendhost_interface in the "
            "inventory")
    return str(devices[0])


def bound_addresses(session: RemoteShell) -> dict[str, str]:
    """IPv4 address -> interface, from `ip -o -4 addr show` on the host."""
    result = session.run("ip -o -4 addr show")
    if result.rc != 0:
        raise ProvisionFailed(f"`ip -o -4 addr show` failed on the host: {result.stderr.strip() or result.rc}")
    bound: dict[str, str] = {}
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "inet":
            bound[fields[3].split("/")[0]] = fields[1]
    return bound


def _check_slot(session: RemoteShell, index: int, address: str, interface: str, bound: dict[str, str],
                probe: tuple[str, int] | None, expected: str) -> SlotCheck:
    bound_on = bound.get(address)
    if bound_on is None:
        return SlotCheck(index, address, "failed", None, None, f"not bound on {interface}")
    if bound_on != interface:
        return SlotCheck(index, address, "failed", bound_on, None, f"bound on {bound_on}, expected {interface}")
    if probe is None:
        return SlotCheck(index, address, "ok", bound_on, None, "bound; source not checked (no --probe)")
    host, port = probe
    command = " ".join(shlex.quote(p) for p in ("python3", "-c", _PROBE_CLIENT, host, str(port), address))
    result = session.run(command)
    words = result.stdout.strip().split(maxsplit=1)
    if result.rc == NOT_FOUND:
        return SlotCheck(index, address, "failed", bound_on, None, "python3 not found on the host; cannot probe")
    if result.rc != 0 or len(words) != 2 or words[0] != "seen":
        reason = words[1] if len(words) == 2 else (result.stderr.strip() or f"exit {result.rc}")
        return SlotCheck(index, address, "failed", bound_on, None, f"probe {host}:{port} not reached: {reason}")
    seen = words[1]
    if seen != expected:
        what = expected if expected == address else f"its Elastic IP {expected}"
        return SlotCheck(index, address, "failed", bound_on, seen, f"probe saw {seen}, expected {what}")
    return SlotCheck(index, address, "ok", bound_on, seen, f"probe saw {seen}")


def ntp_status(session: RemoteShell) -> NtpCheck:
    """Ask timedatectl, then chronyc, then ntpstat; unknown when none of them can tell."""
    result = session.run("timedatectl show -p NTPSynchronized --value")
    answer = result.stdout.strip()
    if result.rc == 0 and answer in ("yes", "no"):
        return NtpCheck("synchronised" if answer == "yes" else "not synchronised", "timedatectl")
    result = session.run("chronyc -n tracking")
    if result.rc == 0:
        leap = next((line.split(":", 1)[1].strip() for line in result.stdout.splitlines()
                     if line.startswith("Leap status")), "")
        if leap:
            return NtpCheck("not synchronised" if leap == "Not synchronised" else "synchronised", "chronyc")
    result = session.run("ntpstat")
    if result.rc in (0, 1):  # 2 (or command not found) means ntpstat cannot tell
        return NtpCheck("synchronised" if result.rc == 0 else "not synchronised", "ntpstat")
    return NtpCheck("unknown", None)
