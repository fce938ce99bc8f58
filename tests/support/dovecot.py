"""A real IMAP server for tests: Debian's dovecot (dovecot-imapd), started in the foreground on free loopback ports
(IMAPS and IMAP with STARTTLS), TLS from a trustme CA, users from a passwd file, Maildirs under a temporary directory.

Run as root it needs its own unprivileged users (`dovecot`, `dovenull`, created by the package) for its login
processes, and a mail user: the test's Maildirs belong to `nobody`. No systemd: `dovecot -F -c <config>`.
"""

from __future__ import annotations

import imaplib
import os
import pwd
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
import trustme

from tests.support.net import free_port, on_ci, stop_process

MAIL_USER = "nobody"


def dovecot_or_skip() -> str:
    found = shutil.which("dovecot") or ("/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None)
    if found is None or not Path("/usr/lib/dovecot/imap").exists():
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
        path = self.base / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _namespace(special_use: dict[str, str]) -> str:
    """The inbox namespace with these folders made for every user and marked with their RFC 6154 attribute
    (`{"Outgoing": "\\Sent"}`); nothing (dovecot's implicit namespace) without any."""
    if not special_use:
        return ""
    folders = "".join(f'  mailbox "{name}" {{\n    special_use = {use}\n    auto = create\n  }}\n'
                      for name, use in special_use.items())
    return f"namespace inbox {{\n  inbox = yes\n  separator = /\n{folders}}}\n"


def _oauth2(base: Path, introspection_url: str | None) -> tuple[str, str]:
    """The mechanisms and the passdb that check OAuth bearer tokens by introspection (RFC 7662) at
    `introspection_url`, as a provider's IMAP does; passwords still log in through the passwd-file passdb."""
    if introspection_url is None:
        return "", ""
    (base / "oauth2.conf.ext").write_text(
        f"introspection_mode = post\nintrospection_url = {introspection_url}\nforce_introspection = yes\n"
        "username_attribute = username\nactive_attribute = active\nactive_value = true\n")
    return " xoauth2 oauthbearer", f"""passdb {{
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = {base}/oauth2.conf.ext
}}
"""


def _config(base: Path, imaps: int, starttls: int, uid: int, gid: int,
            introspection_url: str | None = None) -> str:
    mechanisms, oauth2_passdb = _oauth2(base, introspection_url)
    return f"""
base_dir = {base}/run
state_dir = {base}/state
log_path = {base}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <{base}/cert.pem
ssl_key = <{base}/key.pem
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = yes
auth_mechanisms = plain login{mechanisms}
first_valid_uid = {uid}
last_valid_uid = {uid}
mail_location = maildir:~/Maildir
default_internal_user = dovecot
default_login_user = dovenull
{oauth2_passdb}passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {base}/users
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={base}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    port = {starttls}
  }}
  inet_listener imaps {{
    port = {imaps}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
"""


@contextmanager
def dovecot_server(users: dict[str, str], special_use: dict[str, str] | None = None,
                   oauth2_introspection_url: str | None = None) -> Iterator[Dovecot]:
    """`oauth2_introspection_url`: also take XOAUTH2 and OAUTHBEARER, each token checked there."""
    binary = dovecot_or_skip()
    # Not under pytest's tmp_path: its parents are 0700 root, and dovecot's processes run as other users.
    base = Path(tempfile.mkdtemp(prefix="sendhost-imap-", dir="/tmp"))
    base.chmod(0o755)
    mail_user = pwd.getpwnam(MAIL_USER)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(base / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(base / "cert.pem"))
    (base / "key.pem").chmod(0o600)
    ca.cert_pem.write_to_path(str(base / "ca.pem"))
    (base / "users").write_text("".join(f"{name}:{{PLAIN}}{password}::::::\n" for name, password in users.items()))
    for name in users:
        home = base / "home" / name
        home.mkdir(parents=True)
    for path in [base / "home", *(base / "home").iterdir()]:
        os.chown(path, mail_user.pw_uid, mail_user.pw_gid)
    for sub in ("run", "state"):
        (base / sub).mkdir()
    imaps, starttls = free_port(), free_port()
    (base / "dovecot.conf").write_text(_config(base, imaps, starttls, mail_user.pw_uid, mail_user.pw_gid,
                                               oauth2_introspection_url)
                                       + _namespace(special_use or {}))
    process = subprocess.Popen([binary, "-F", "-c", str(base / "dovecot.conf")], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    server = Dovecot("127.0.0.1", imaps, starttls, base / "ca.pem", base, dict(users))
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
