"""A real submission server for tests: Debian's Postfix, authenticating through Dovecot SASL, on a free loopback port.

Postfix's smtpd takes STARTTLS (required before AUTH; a trustme CA) and hands each AUTH to a Dovecot instance that
does nothing but authenticate (`protocols =`, users from a passwd file), over Dovecot's auth socket, as a
provider's submission service does. Everything it relays goes to Postfix's `discard` transport. Its log is a file
(`maillog_file`), which is what a test reads: each smtpd session's `connect from` ... `disconnect from ...
auth=OK/TRIED` line, and one `SASL <MECHANISM> authentication failed` warning per refused login.

Both run as root with their own unprivileged users (`postfix`, `dovecot`, `dovenull`, made by the packages); no
systemd: `postfix -c DIR start` (it daemonizes; `postfix -c DIR stop` ends it) and `dovecot -F -c CONFIG`.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from rehearsal.dovecot import oauth2_settings
from tests.support.dovecot import dovecot_or_skip
from tests.support.net import free_port, on_ci, stop_process

POSTFIX = "/usr/sbin/postfix"


def postfix_or_skip() -> str:
    if not Path(POSTFIX).exists():
        if on_ci():
            pytest.fail("postfix is not installed on CI: .ci/run should install Debian's `postfix` package")
        pytest.skip("install Debian's `postfix` package to run the Postfix submission tests")
    return POSTFIX


@dataclass(frozen=True)
class Session:
    """One smtpd session as Postfix logged it: the mechanism of each refused login, and its AUTH count."""

    failed_logins: tuple[str, ...]
    # the disconnect line's AUTH count: "0/1" one tried, none succeeded; "1" every one tried succeeded; "" none tried
    auth: str


@dataclass
class Postfix:
    host: str
    port: int
    ca_file: Path
    base: Path

    def log(self) -> str:
        path = self.base / "maillog"
        return path.read_text(errors="replace") if path.exists() else ""

    def sessions(self, at_least: int = 0, timeout_s: float = 15.0) -> list[Session]:
        """Every finished smtpd session, in order: once at least `at_least` have ended and each connected one has
        (Postfix logs a session's end a moment after the client saw it)."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.log()
            connects = len(re.findall(r"postfix/smtpd\[\d+\]: connect from", text))
            disconnects = len(re.findall(r"postfix/smtpd\[\d+\]: disconnect from", text))
            if connects == disconnects >= at_least:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"Postfix logged {disconnects} session end(s) of {connects}, expected at least "
                                     f"{at_least}: {text}")
            time.sleep(0.1)
        sessions: list[Session] = []
        failed: dict[str, list[str]] = {}
        for line in text.splitlines():
            match = re.search(r"postfix/smtpd\[(\d+)\]: (.*)", line)
            if not match:
                continue
            pid, what = match.groups()
            if what.startswith("connect from"):
                failed[pid] = []
            elif refused := re.search(r"SASL (\S+) authentication failed", what):
                failed.setdefault(pid, []).append(refused.group(1))
            elif what.startswith("disconnect from"):
                auth = re.search(r"\bauth=(\d+(?:/\d+)?)", what)
                sessions.append(Session(tuple(failed.pop(pid, [])), auth.group(1) if auth else ""))
        return sessions


def _dovecot_config(base: Path, introspection_url: str | None) -> str:
    mechanisms, oauth2_passdb = oauth2_settings(base / "dovecot", introspection_url)
    return f"""
base_dir = {base}/dovecot/run
state_dir = {base}/dovecot/state
log_path = {base}/dovecot/dovecot.log
protocols =
ssl = no
auth_mechanisms = plain login{mechanisms}
auth_verbose = yes
# a refused login answers at once: the tests count refusals, they do not time them
auth_failure_delay = 0
default_internal_user = dovecot
default_login_user = dovenull
{oauth2_passdb}passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {base}/dovecot/users
}}
userdb {{
  driver = static
  args = uid=nobody gid=nogroup home=/nonexistent
}}
service auth {{
  unix_listener {base}/auth-postfix {{
    mode = 0666
  }}
}}
service anvil {{
  chroot =
}}
"""


def _main_cf(base: Path) -> str:
    return f"""
compatibility_level = 3.6
config_directory = {base}/etc
queue_directory = {base}/spool
data_directory = {base}/lib
mail_owner = postfix
setgid_group = postdrop
myhostname = localhost
mydomain = localdomain
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
maillog_file = {base}/maillog
maillog_file_prefixes = {base}
smtpd_tls_cert_file = {base}/cert.pem
smtpd_tls_key_file = {base}/key.pem
smtpd_tls_security_level = encrypt
smtpd_tls_auth_only = yes
smtpd_sasl_auth_enable = yes
smtpd_sasl_type = dovecot
smtpd_sasl_path = {base}/auth-postfix
smtpd_relay_restrictions = permit_sasl_authenticated, reject
smtpd_recipient_restrictions = permit_sasl_authenticated, reject
default_transport = discard
relay_transport = discard
"""


# Postfix's services a submission needs, none chrooted (the test's paths are absolute).
_MASTER_CF = """{port}\tinet n - n - - smtpd
cleanup unix n - n - 0 cleanup
qmgr unix n - n 300 1 qmgr
tlsmgr unix - - n 1000? 1 tlsmgr
rewrite unix - - n - - trivial-rewrite
bounce unix - - n - 0 bounce
defer unix - - n - 0 bounce
trace unix - - n - 0 bounce
verify unix - - n - 1 verify
flush unix n - n 1000? 0 flush
proxymap unix - - n - - proxymap
showq unix n - n - - showq
error unix - - n - - error
retry unix - - n - - error
discard unix - - n - - discard
anvil unix - - n - 1 anvil
scache unix - - n - 1 scache
postlog unix-dgram n - n - 1 postlogd
"""


@contextmanager
def postfix_submission(users: dict[str, str], oauth2_introspection_url: str | None = None, *,
                       main_cf_extra: str = "", master_cf_extra: str = "") -> Iterator[Postfix]:
    """Postfix on a free loopback port (STARTTLS, AUTH PLAIN and LOGIN through Dovecot), `users`' passwords;
    `oauth2_introspection_url`: also XOAUTH2 and OAUTHBEARER, Dovecot's oauth2 passdb checking each token there.
    `main_cf_extra` overrides main.cf's settings (a relay instead of `discard`, a signing milter), `master_cf_extra`
    adds services."""
    postfix = postfix_or_skip()
    dovecot = dovecot_or_skip()
    # Not under pytest's tmp_path: its parents are 0700 root, and both servers' processes run as other users.
    base = Path(tempfile.mkdtemp(prefix="sendhost-postfix-", dir="/tmp"))
    base.chmod(0o755)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(base / "key.pem"))
    (base / "key.pem").chmod(0o600)
    cert.cert_chain_pems[0].write_to_path(str(base / "cert.pem"))
    ca.cert_pem.write_to_path(str(base / "ca.pem"))
    for sub in ("dovecot/run", "dovecot/state", "etc", "spool", "lib"):
        (base / sub).mkdir(parents=True)
    owner = pwd.getpwnam("postfix")
    os.chown(base / "lib", owner.pw_uid, owner.pw_gid)
    (base / "dovecot" / "users").write_text("".join(f"{name}:{{PLAIN}}{password}::::::\n"
                                                    for name, password in users.items()))
    (base / "dovecot" / "dovecot.conf").write_text(_dovecot_config(base, oauth2_introspection_url))
    port = free_port()
    (base / "etc" / "main.cf").write_text(_main_cf(base) + main_cf_extra)
    (base / "etc" / "master.cf").write_text(_MASTER_CF.format(port=f"127.0.0.1:{port}") + master_cf_extra)
    auth = subprocess.Popen([dovecot, "-F", "-c", str(base / "dovecot" / "dovecot.conf")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    started = False
    server = Postfix("127.0.0.1", port, base / "ca.pem", base)
    try:
        deadline = time.monotonic() + 30
        while not (base / "auth-postfix").exists():
            if auth.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dovecot's auth socket never appeared: {auth.poll()}")
            time.sleep(0.05)
        run = subprocess.run([postfix, "-c", str(base / "etc"), "start"], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"postfix start exited {run.returncode}: {run.stderr}{server.log()}")
        started = True
        while True:
            try:
                with socket.create_connection((server.host, port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postfix never listened: {server.log()}") from None
                time.sleep(0.1)
        # the probe above is a session of its own: wait until Postfix logged its end, then start the count after it
        server.sessions(at_least=1)
        yield server
    finally:
        if started:
            subprocess.run([postfix, "-c", str(base / "etc"), "stop"], capture_output=True, text=True)
        stop_process(auth)
        shutil.rmtree(base, ignore_errors=True)
