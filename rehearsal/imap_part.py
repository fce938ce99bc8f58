"""The sandbox's IMAP server: Debian's dovecot with rehearsal.dovecot's configuration (IMAPS on a free loopback
port, TLS from a CA of its own), each sandbox mailbox a user with its sandbox password and a Sent folder.

Its configuration, key and passwords live in the sandbox directory (`imap/`, 0700). Its sockets and Maildirs live
in a directory of their own under /tmp, recorded as the part's `shared` the moment it is made, so `down` removes
it: as root dovecot's login and mail users must reach them, which they cannot inside the 0700 sandbox directory,
and a short path keeps its Unix sockets under the 108-byte limit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from rehearsal import dovecot, parts
from rehearsal.mailstore import ImapAddress, write_address
from sendhost import signals

NAME = "imap"
SENT = {"Sent": "\\Sent"}  # what the sender's Sent-folder look-up finds by its RFC 6154 attribute
NOT_AVAILABLE = f"not available ({dovecot.INSTALL_HINT})"


def available() -> bool:
    return dovecot.find_dovecot() is not None


def start(root: Path, users: Mapping[str, str]) -> ImapAddress | None:
    """Start dovecot for `users` and wait until it answers; None when dovecot is not installed."""
    binary = dovecot.find_dovecot()
    if binary is None:
        return None
    remove_shared(root)  # what a dovecot that stopped on its own left behind
    with signals.held():
        shared = Path(tempfile.mkdtemp(prefix="sendhost-imap-", dir="/tmp"))
        parts.record(root, NAME, shared=str(shared))
    if os.geteuid() == 0:
        shared.chmod(0o755)  # dovenull and nobody (see rehearsal.dovecot) reach the sockets and Maildirs in it
    private = root / NAME
    private.mkdir(mode=0o700, exist_ok=True)
    where = dovecot.layout(private, shared)
    imaps, starttls = parts.free_port(), parts.free_port()
    dovecot.prepare(where, users, imaps, starttls, special_use=SENT)
    address = ImapAddress("127.0.0.1", imaps, where.ca_file)
    # dovecot's master works in its base_dir: started there, its pid is recognised as ours from the first moment.
    process = parts.spawn(root, NAME, dovecot.command(binary, where), str(address), cwd=where.run_dir)
    parts.wait_until(lambda: parts.port_answers(imaps), "IMAP server (dovecot)", process, where.log)
    write_address(root, address)
    return address


def remove_shared(root: Path) -> None:
    """Remove the part's directory under /tmp (its process stopped first)."""
    shared = parts.read_parts(root).get(NAME, {}).get("shared")
    if isinstance(shared, str) and Path(shared).name.startswith("sendhost-imap-"):
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(shared)
