"""`host verify`, outbound submission: can the host open TCP to each mailbox's submission server (587/465)?

Checked from the host itself, over the verify SSH session: a security group, a network ACL or a missing route stops
mail there, and AWS's view of the account cannot tell which of them a given path crosses. One script opens every
connection at once (each with its own timeout) and reports how each ended; the fix is chosen here, not on the host.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioning.verify import RemoteShell

CONNECT_TIMEOUT_S = 5.0
NOT_FOUND = 127
# Runs on the sender host: connect to every HOST PORT pair in parallel, print one JSON list of how each ended.
_EGRESS_CLIENT = """
import errno, json, socket, sys, threading
timeout, pairs = float(sys.argv[1]), sys.argv[2:]
results = [None] * (len(pairs) // 2)
def attempt(i, host, port):
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        results[i] = ["connected", ""]
    except socket.gaierror as exc:
        results[i] = ["unresolved", str(exc)]
    except socket.timeout:
        results[i] = ["timeout", ""]
    except ConnectionRefusedError as exc:
        results[i] = ["refused", str(exc)]
    except OSError as exc:
        kind = "unreachable" if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH) else "error"
        results[i] = [kind, str(exc)]
threads = [threading.Thread(target=attempt, args=(i, pairs[2 * i], int(pairs[2 * i + 1])))
           for i in range(len(results))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(results))
"""


class EgressStatus(StrEnum):
    REACHABLE = "reachable"
    BLOCKED = "blocked"
    COULDNT_CHECK = "couldnt_check"  # nothing was learnt (no python3 on the host, no answer from the script)


@dataclass(frozen=True)
class EgressCheck:
    """Whether the host reached one submission server, and the fix when it did not."""

    host: str
    port: int
    status: EgressStatus
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status == EgressStatus.REACHABLE


def check_submission_egress(session: RemoteShell, endpoints: Sequence[tuple[str, int]],
                            timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[EgressCheck, ...]:
    """Open a TCP connection from the host to each (host, port); one check per endpoint, in order."""
    if not endpoints:
        return ()
    words = ["python3", "-c", _EGRESS_CLIENT, str(timeout_s), *(str(p) for pair in endpoints for p in pair)]
    result = session.run(" ".join(shlex.quote(w) for w in words), timeout=timeout_s + 25)
    if result.rc == NOT_FOUND:
        return _unchecked(endpoints, "python3 not found on the host", "install python3 on the host (the "
                                                                      "sender_base role does)")
    outcomes = _outcomes(result.stdout, len(endpoints))
    if outcomes is None:
        reason = (result.stderr.strip().splitlines() or [f"exit {result.rc}"])[-1]
        return _unchecked(endpoints, f"the connection script failed on the host: {reason}",
                          "run `sendhost host verify` again; if it repeats, run the check by hand over SSH")
    return tuple(judge(host, port, kind, error) for (host, port), (kind, error) in zip(endpoints, outcomes,
                                                                                     strict=True))


def _outcomes(stdout: str, count: int) -> list[tuple[str, str]] | None:
    """The script's [[outcome, error], ...], or None when it printed anything else."""
    try:
        parsed = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(parsed, list) or len(parsed) != count:
        return None
    if not all(isinstance(item, list) and len(item) == 2 for item in parsed):
        return None
    return [(str(kind), str(error)) for kind, error in parsed]


def _unchecked(endpoints: Sequence[tuple[str, int]], detail: str, fix: str) -> tuple[EgressCheck, ...]:
    return tuple(EgressCheck(host, port, EgressStatus.COULDNT_CHECK, detail, fix) for host, port in endpoints)


def judge(host: str, port: int, outcome: str, error: str = "") -> EgressCheck:
    """The check for one connection attempt that ended in `outcome` (as the host's script reports it)."""
    where = f"{host}:{port}"
    open_port = (f"allow outbound TCP {port} to {host} in the instance's security group and its subnet's network "
                 f"ACL (EC2 blocks 25 by default; submission uses 587/465)")
    if port == 25:  # opening 25 in a security group does not lift AWS's own block: submission never needs it
        open_port = ("use the provider's submission port (587 STARTTLS or 465 TLS) as the mailbox's smtp.port: "
                     "EC2 blocks outbound 25 by default")
    if outcome == "connected":
        return EgressCheck(host, port, EgressStatus.REACHABLE, f"TCP to {where} opened from the host")
    if outcome == "timeout":
        return EgressCheck(host, port, EgressStatus.BLOCKED,
                           f"no answer from {where} within {CONNECT_TIMEOUT_S:g}s: something drops outbound {port}",
                           open_port)
    if outcome == "refused":
        return EgressCheck(host, port, EgressStatus.BLOCKED,
                           f"{where} refused the connection ({error or 'connection refused'})",
                           f"check the mailbox's smtp.host and smtp.port against the provider's submission "
                           f"settings; if they are right, a firewall rejects outbound {port}: {open_port}")
    if outcome == "unreachable":
        return EgressCheck(host, port, EgressStatus.BLOCKED, f"no route from the host to {where} ({error})",
                           "give the subnet a 0.0.0.0/0 route to an internet gateway (`sendhost pool doctor` "
                           "checks it)")
    if outcome == "unresolved":
        return EgressCheck(host, port, EgressStatus.BLOCKED, f"the host could not resolve {host} ({error})",
                           "check the spelling of the mailbox's smtp.host and the host's DNS resolver")
    return EgressCheck(host, port, EgressStatus.BLOCKED, f"connecting to {where} failed: {error or outcome}",
                       open_port)
