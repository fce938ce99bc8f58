"""SSH sessions with paramiko, known hosts enforced: an unknown or changed host key is refused, never added."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from provisioning.errors import ProvisionConfigError, ProvisionFailed
from provisioning.targets import require_connectable
from sendhost.model import SshTarget

CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str


def _host_key_name(target: SshTarget) -> str:
    return str(target.address) if target.port == 22 else f"[{target.address}]:{target.port}"


def _keyscan_hint(target: SshTarget) -> str:
    port = "" if target.port == 22 else f"-p {target.port} "
    return f"ssh-keyscan {port}{target.address} >> {shlex.quote(str(target.known_hosts))}"


class SshSession:
    """One authenticated connection; `run` executes a command and returns its exit code and output."""

    def __init__(self, client: Any, target: SshTarget) -> None:
        self._client = client
        self.target = target

    def run(self, command: str, timeout: float = 20.0) -> CommandResult:
        _, stdout, stderr = self._client.exec_command(command, timeout=timeout)
        out = stdout.read().decode(errors="replace")
        err = stderr.read().decode(errors="replace")
        return CommandResult(rc=stdout.channel.recv_exit_status(), stdout=out, stderr=err)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SshSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def open_session(target: SshTarget, timeout: float = CONNECT_TIMEOUT_S) -> SshSession:
    """Connect and authenticate with the target's key, trusting only keys in its known_hosts file."""
    import paramiko  # late: only `host verify` needs it

    require_connectable(target)
    assert target.address is not None and target.key_file is not None
    if not target.known_hosts.is_file():
        raise ProvisionConfigError(
            f"{target.name}: known hosts file {target.known_hosts} does not exist; after checking the host's "
            f"fingerprint out of band, trust it with: {_keyscan_hint(target)}"
        )
    client = paramiko.SSHClient()
    client.load_host_keys(str(target.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    where = f"{target.name} ({target.address}:{target.port})"
    try:
        client.connect(
            target.address, port=target.port, username=target.user, key_filename=str(target.key_file),
            timeout=timeout, banner_timeout=timeout, auth_timeout=timeout, look_for_keys=False, allow_agent=False,
        )
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise ProvisionFailed(
            f"{where}: host key CHANGED: it offered {exc.key.get_name()} {exc.key.get_fingerprint().hex()} but "
            f"{target.known_hosts} holds another key. Someone may be intercepting the connection; if the host was "
            f"rebuilt, run `ssh-keygen -R '{_host_key_name(target)}' -f {target.known_hosts}` and then "
            f"{_keyscan_hint(target)}"
        ) from None
    except paramiko.AuthenticationException:
        client.close()
        raise ProvisionFailed(f"{where}: user {target.user} was refused with key {target.key_file}") from None
    except paramiko.SSHException as exc:
        client.close()
        if "not found in known_hosts" in str(exc):
            raise ProvisionConfigError(
                f"{where}: host key unknown: {_host_key_name(target)} is not in {target.known_hosts}; after "
                f"checking its fingerprint out of band, trust it with: {_keyscan_hint(target)}"
            ) from None
        raise ProvisionFailed(f"{where}: SSH failed: {exc}") from None
    except OSError as exc:  # refused, timed out, no route
        client.close()
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ProvisionFailed(f"{where}: unreachable: {reason}") from None
    return SshSession(client, target)
