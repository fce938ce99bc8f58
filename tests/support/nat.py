"""AWS's 1:1 NAT for Elastic IPs, modelled for real on the namespace SSH host (tests/support/sshhost.py).

On AWS an Elastic IP associated with a secondary private IP is a 1:1 NAT at the VPC's edge: traffic the instance
sends from that private address leaves with the Elastic IP as its source, and replies to the Elastic IP come back
to the private address. Here nftables in the host's namespace rewrites each slot's source address on the way out
(postrouting SNAT; conntrack reverses it for the replies), and the root namespace routes each Elastic IP back
through the veth pair, as the VPC's internet gateway routes an Elastic IP to its instance.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from tests.support.sshhost import SshHost

NAT_TABLE = "sendhost_elastic_ip_nat"


def nft_missing() -> bool:
    return shutil.which("nft") is None


def routable_elastic_ip(host: SshHost, slot: int) -> str:
    """A TEST-NET address for slot 0 or 1 that the root namespace may route to `host`: the last octet is the third
    one of the host's own subnet, so two sessions' hosts (distinct subnets) never claim the same root-namespace
    route."""
    octet = host.subnet.split(".")[2]
    return (f"203.0.113.{octet}", f"198.51.100.{octet}")[slot]


def _run(*args: str, stdin: str | None = None) -> None:
    """Run a setup command; its own error message (not just the exit status) goes in the failure."""
    result = subprocess.run(list(args), input=stdin, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")


@contextmanager
def elastic_ip_nat(host: SshHost, elastic_ips: Mapping[str, str]) -> Iterator[None]:
    """Within the block, traffic from each private address in `elastic_ips` leaves `host` with its Elastic IP as
    the source, and the root namespace routes that Elastic IP back to `host`. The nft table and routes are removed
    afterwards, even when setting them up failed halfway."""
    rules = "".join(f"    ip saddr {private} snat to {public}\n" for private, public in elastic_ips.items())
    table = (f"table ip {NAT_TABLE} {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat\n"
             f"{rules}  }}\n}}\n")
    routed: list[str] = []
    try:
        _run("ip", "netns", "exec", host.netns, "nft", "-f", "-", stdin=table)
        for public in elastic_ips.values():
            _run("ip", "route", "add", f"{public}/32", "via", host.address)
            routed.append(public)
        yield
    finally:
        for public in routed:
            subprocess.run(["ip", "route", "del", f"{public}/32", "via", host.address], check=False,
                           capture_output=True)
        subprocess.run(["ip", "netns", "exec", host.netns, "nft", "delete", "table", "ip", NAT_TABLE], check=False,
                       capture_output=True)
