"""A real IMAP server for tests: Debian's dovecot (dovecot-imapd), started in the foreground on free loopback ports
(IMAPS and IMAP with STARTTLS), users from a passwd file, Maildirs under a temporary directory: the configuration
`sendhost sandbox` runs (rehearsal.dovecot), which also says who runs what as root.
"""

from __future__ import annotations

import imaplib
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rehearsal import dovecot
from tests.support.net import free_port, on_ci, stop_process


def dovecot_or_skip() -> str:
    found = dovecot.find_dovecot()
    if found is None:
        if on_ci():
            pytest.fail("dovecot is not installed on CI: .ci/run should install Debian's `dovecot-imapd` package")
        pytest.skip("install Debian's `dovecot-imapd` package to run the inbox tests")
    return found


@dataclass
class Dovecot:
    host: str
    imaps_port: int
    starttls_port: int
    ca_file: Path
    base: Path
    users: dict[str, str] = field(default_factory=dict)
    log_file: Path | None = None

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def append(self, user: str, raw: bytes, folder: str = "INBOX") -> None:
        """Put a message in `user`'s folder over IMAP, as a delivery would."""
        with imaplib.IMAP4_SSL(self.host, self.imaps_port, ssl_context=self.client_context(), timeout=10) as imap:
            imap.login(user, self.users[user])
            status, detail = imap.append(f'"{folder}"', "", imaplib.Time2Internaldate(time.time()), raw)
            assert status == "OK", detail

    def create(self, user: str, folder: str) -> None:
        with imaplib.IMAP4_SSL(self.host, self.imaps_port, ssl_context=self.client_context(), timeout=10) as imap:
            imap.login(user, self.users[user])
            status, detail = imap.create(f'"{folder}"')
            assert status == "OK", detail

    def flags(self, user: str, folder: str) -> list[bytes]:
        """Each message's UID and flags in `folder`, read without changing any (EXAMINE keeps even \\Recent)."""
        with imaplib.IMAP4_SSL(self.host, self.imaps_port, ssl_context=self.client_context(), timeout=10) as imap:
            imap.login(user, self.users[user])
            status, detail = imap.select(f'"{folder}"', readonly=True)
            assert status == "OK", detail
            if int(detail[0] or 0) == 0:
                return []
            status, fetched = imap.fetch("1:*", "(UID FLAGS)")
            assert status == "OK", fetched
            return sorted(item for item in fetched if isinstance(item, bytes))

    def log(self) -> str:
        path = self.log_file or self.base / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def dovecot_server(users: dict[str, str], special_use: dict[str, str] | None = None,
                   oauth2_introspection_url: str | None = None) -> Iterator[Dovecot]:
    """`oauth2_introspection_url`: also take XOAUTH2 and OAUTHBEARER, each token checked there."""
    binary = dovecot_or_skip()
    # Not under pytest's tmp_path: its parents are 0700 root, and dovecot's processes run as other users.
    base = Path(tempfile.mkdtemp(prefix="sendhost-imap-", dir="/tmp"))
    base.chmod(0o755)
    (base / "private").mkdir(mode=0o700)
    where = dovecot.layout(base / "private", base)
    imaps, starttls = free_port(), free_port()
    dovecot.prepare(where, users, imaps, starttls, special_use=special_use,
                    introspection_url=oauth2_introspection_url)
    process = subprocess.Popen(dovecot.command(binary, where), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    server = Dovecot("127.0.0.1", imaps, starttls, where.ca_file, base, dict(users), where.log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                output = process.stdout.read() if process.stdout else ""
                raise RuntimeError(f"dovecot exited {process.returncode}: {output}{server.log()}")
            try:
                with socket.create_connection((server.host, imaps), timeout=1), \
                        socket.create_connection((server.host, starttls), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dovecot never listened: {server.log()}") from None
                time.sleep(0.1)
        yield server
    finally:
        stop_process(process)
        shutil.rmtree(base, ignore_errors=True)
