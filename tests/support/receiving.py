"""A real receiving world on loopback, every part a Debian package, for placement tests:

- the mailboxes' submission server: Postfix (tests/support/postfix.py, AUTH through Dovecot SASL) whose OpenDKIM
  milter signs each message with its sender's selector, relaying everything to
- the seeds' provider, a second Postfix: OpenDKIM verifies, postfix-policyd-spf-python evaluates SPF, OpenDMARC
  evaluates DMARC, each writing Authentication-Results under `mx.test`; it delivers by LMTP to
- Dovecot (IMAP for the seeds, LMTP with Pigeonhole Sieve), whose global Sieve rule files a message whose verdicts
  say dkim or dmarc failed into the seed's Junk folder (marked \\Junk);
- the DNS every check reads served by the test NSD, on port 53 of a loopback address of its own: the receiving
  daemons run in a mount namespace of their own whose /etc/resolv.conf names it (resolv.conf takes no port, and
  OpenDMARC and policyd-spf read nothing else); the machine's own resolv.conf is never touched.

Everything runs as root in the foreground (`-f`) or daemonized by `postfix start`, stopped on exit.
"""

from __future__ import annotations

import base64
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from rehearsal import dovecot as dovecot_config
from tests.support.dovecot import dovecot_or_skip
from tests.support.net import free_port, on_ci, stop_process
from tests.support.nsd import nsd_available, nsd_server
from tests.support.postfix import Postfix, postfix_or_skip, postfix_submission

AUTHSERV_ID = "mx.test"
BINARIES = {"/usr/sbin/opendkim": "opendkim", "/usr/sbin/opendmarc": "opendmarc",
            "/usr/bin/policyd-spf": "postfix-policyd-spf-python", "/usr/bin/sievec": "dovecot-sieve",
            "/usr/lib/dovecot/lmtp": "dovecot-lmtpd"}
JUNK_SIEVE = """require ["fileinto"];
if header :contains "Authentication-Results" ["dkim=fail", "dmarc=fail", "dkim=permerror"] {
  fileinto "Junk";
  stop;
}
"""


def receiving_world_or_skip() -> None:
    missing = sorted({package for path, package in BINARIES.items() if not Path(path).exists()})
    if not nsd_available():
        missing.append("nsd")
    if missing:
        if on_ci():
            pytest.fail(f"not installed on CI: .ci/run should install Debian's {', '.join(missing)}")
        pytest.skip(f"install Debian's {', '.join(missing)} to run the receiving-world placement tests")
    if os.geteuid() != 0:  # port 53, a mount namespace, Postfix's own users: as the other mail-server tests
        if on_ci():
            pytest.fail("the receiving world needs root (port 53, a mount namespace for resolv.conf)")
        pytest.skip("the receiving-world placement test needs root (port 53, a mount namespace)")
    postfix_or_skip()
    dovecot_or_skip()


@dataclass(frozen=True)
class Sender:
    """A mailbox of the sending side: its address, SASL password and DKIM selector (`published`: its key in DNS)."""

    address: str
    password: str
    selector: str
    published: bool = True


@dataclass
class ReceivingWorld:
    submission: Postfix  # where the mailboxes submit (STARTTLS, AUTH)
    imap: dovecot_config.Layout
    imap_port: int
    imap_ca: Path
    receiver: Path  # the receiving Postfix's directory (its maillog)
    dns: str  # the NSD's address (port 53)

    def receiver_log(self) -> str:
        path = self.receiver / "maillog"
        return path.read_text(errors="replace") if path.exists() else ""


def _in_namespace(resolv: Path, command: list[str]) -> list[str]:
    """`command` in a mount namespace of its own whose /etc/resolv.conf is `resolv`."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind {resolv} /etc/resolv.conf && exec "$@"', "sh", *command]


def _key(directory: Path, selector: str) -> str:
    """A 1024-bit RSA key for `selector` (its private PEM written there); the DNS TXT text of its public key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    (directory / f"{selector}.private").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return f"v=DKIM1; k=rsa; p={base64.b64encode(public).decode()}"


def _zone(domain: str, txt: dict[str, str]) -> str:
    lines = [f"$ORIGIN {domain}.", "$TTL 60",
             f"@ IN SOA ns.{domain}. hostmaster.{domain}. 1 3600 600 86400 60", f"@ IN NS ns.{domain}.",
             "ns IN A 127.0.0.1"]
    for name, text in txt.items():
        chunks = " ".join(f'"{text[i:i + 200]}"' for i in range(0, len(text), 200))
        lines.append(f"{name} IN TXT {chunks}")
    return "\n".join(lines) + "\n"


def _wait_port(port: int, process: subprocess.Popen[str] | None, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise RuntimeError(f"{what} exited {process.returncode}: {output}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} never listened on {port}") from None
            time.sleep(0.1)


def _start(stack: ExitStack, command: list[str], port: int, what: str) -> None:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stack.callback(stop_process, process)
    _wait_port(port, process, what)


@contextmanager
def receiving_world(domain: str, senders: list[Sender], seeds: dict[str, str]) -> Iterator[ReceivingWorld]:
    """The world above for `senders` of `domain` (SPF: 127.0.0.1; DMARC p=quarantine) and `seeds` (address:
    password) at AUTHSERV_ID."""
    receiving_world_or_skip()
    base = Path(tempfile.mkdtemp(prefix="sendhost-rx-", dir="/tmp"))
    base.chmod(0o755)
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, base, True)
        # DNS: the domain's SPF, DMARC and each published selector's key, on port 53 of an address of our own
        dns = f"127.{random.randint(64, 250)}.{random.randint(1, 250)}.1"
        keys = base / "keys"
        keys.mkdir()
        txt = {"@": "v=spf1 ip4:127.0.0.1 -all", "_dmarc": "v=DMARC1; p=quarantine; adkim=r; aspf=r"}
        for sender in senders:
            record = _key(keys, sender.selector)
            if sender.published:
                txt[f"{sender.selector}._domainkey"] = record
        (base / "nsd").mkdir()
        stack.enter_context(nsd_server(base / "nsd", {domain: _zone(domain, txt)}, host=dns, port=53))
        resolv = base / "resolv.conf"
        resolv.write_text(f"nameserver {dns}\noptions timeout:1 attempts:2\n")
        (base / "unbound.conf").write_text(f'server:\n  do-not-query-localhost: no\nstub-zone:\n  name: "{domain}"\n'
                                           f"  stub-addr: {dns}@53\n")
        # the seeds' Dovecot: IMAP, and LMTP with the Sieve rule
        imap_port, lmtp_port = free_port(), free_port()
        layout = dovecot_config.layout(base / "dovecot-private", base)
        layout.private.mkdir(mode=0o700)
        config = dovecot_config.prepare(layout, seeds, imap_port, free_port(), special_use={"Junk": "\\Junk"})
        sieve = base / "sieve"
        sieve.mkdir()
        (sieve / "junk.sieve").write_text(JUNK_SIEVE)
        subprocess.run(["/usr/bin/sievec", str(sieve / "junk.sieve")], check=True, capture_output=True)
        with config.open("a") as handle:
            handle.write(f"""
protocols = imap lmtp
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
protocol lmtp {{
  mail_plugins = $mail_plugins sieve
  postmaster_address = postmaster@{AUTHSERV_ID}
}}
plugin {{
  sieve_before = {sieve}/junk.sieve
}}
""")
        _start(stack, dovecot_config.command(dovecot_or_skip(), layout), lmtp_port, "dovecot (seeds)")
        _wait_port(imap_port, None, "dovecot IMAP")
        # the receiving side's milters, in the namespace that reads our DNS
        milters = base / "milters"
        milters.mkdir()
        verify_port, dmarc_port = free_port(), free_port()
        (milters / "verify.conf").write_text(
            f"Syslog no\nMode v\nSocket inet:{verify_port}@127.0.0.1\nAuthservID {AUTHSERV_ID}\n"
            f"ResolverConfiguration {base}/unbound.conf\nBackground no\nPidFile {milters}/verify.pid\n"
            "AlwaysAddARHeader yes\n")
        _start(stack, _in_namespace(resolv, ["/usr/sbin/opendkim", "-f", "-x", str(milters / "verify.conf")]),
               verify_port, "opendkim (verify)")
        (milters / "ignore").write_text("192.0.2.1\n")
        (milters / "dmarc.conf").write_text(
            f"AuthservID {AUTHSERV_ID}\nTrustedAuthservIDs {AUTHSERV_ID}\nSocket inet:{dmarc_port}@127.0.0.1\n"
            f"Syslog false\nBackground false\nPidFile {milters}/dmarc.pid\nIgnoreHosts {milters}/ignore\n"
            "IgnoreAuthenticatedClients false\nRejectFailures false\nSPFIgnoreResults false\n"
            "SPFSelfValidate false\nRequiredHeaders false\n")
        _start(stack, _in_namespace(resolv, ["/usr/sbin/opendmarc", "-f", "-c", str(milters / "dmarc.conf")]),
               dmarc_port, "opendmarc")
        # the receiving Postfix
        receiver = _receiver(base / "receiver", resolv, lmtp_port, verify_port, dmarc_port)
        stack.callback(subprocess.run, ["/usr/sbin/postfix", "-c", str(receiver / "etc"), "stop"],
                       capture_output=True)
        receiver_port = int((receiver / "port").read_text())
        _wait_port(receiver_port, None, "the receiving postfix")
        # the sending side: OpenDKIM signing each sender's mail with its selector, in the submission Postfix
        sign_port = free_port()
        (milters / "keytable").write_text("".join(
            f"{s.selector}._domainkey.{domain} {domain}:{s.selector}:{keys}/{s.selector}.private\n" for s in senders))
        (milters / "signingtable").write_text("".join(
            f"{s.address} {s.selector}._domainkey.{domain}\n" for s in senders))
        (milters / "sign.conf").write_text(
            f"Syslog no\nMode s\nSocket inet:{sign_port}@127.0.0.1\nKeyTable {milters}/keytable\n"
            f"SigningTable {milters}/signingtable\nInternalHosts 127.0.0.0/8\nRequireSafeKeys no\n"
            f"Canonicalization relaxed/simple\nBackground no\nPidFile {milters}/sign.pid\n")
        _start(stack, ["/usr/sbin/opendkim", "-f", "-x", str(milters / "sign.conf")], sign_port, "opendkim (sign)")
        submission = stack.enter_context(postfix_submission(
            {s.address: s.password for s in senders},
            main_cf_extra=(f"\nmyhostname = out.{domain}\nrelayhost = [127.0.0.1]:{receiver_port}\n"
                           "default_transport = smtp\nrelay_transport = smtp\nsmtp_tls_security_level = none\n"
                           f"smtp_bind_address = 127.0.0.1\nsmtpd_milters = inet:127.0.0.1:{sign_port}\n"
                           "milter_default_action = tempfail\n"),
            master_cf_extra="smtp unix - - n - - smtp\n"))
        yield ReceivingWorld(submission, layout, imap_port, layout.private / "ca.pem", receiver, dns)


def _receiver(base: Path, resolv: Path, lmtp_port: int, verify_port: int, dmarc_port: int) -> Path:
    """The seeds' provider's Postfix, started in the DNS namespace (its policyd-spf is spawned from it)."""
    import pwd

    for sub in ("etc", "spool", "lib"):
        (base / sub).mkdir(parents=True)
    owner = pwd.getpwnam("postfix")
    os.chown(base / "lib", owner.pw_uid, owner.pw_gid)
    port = free_port()
    (base / "port").write_text(str(port))
    (base / "policyd-spf.conf").write_text(
        "debugLevel = 1\nTestOnly = 1\nHELO_reject = False\nMail_From_reject = False\nPermError_reject = False\n"
        f"TempError_Defer = False\nskip_addresses = 192.0.2.255/32\nHeader_Type = AR\nAuthserv_Id = {AUTHSERV_ID}\n")
    (base / "policyd-spf.conf").chmod(0o644)
    (base / "etc" / "main.cf").write_text(f"""
compatibility_level = 3.6
config_directory = {base}/etc
queue_directory = {base}/spool
data_directory = {base}/lib
mail_owner = postfix
setgid_group = postdrop
myhostname = {AUTHSERV_ID}
mydomain = {AUTHSERV_ID}
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
maillog_file = {base}/maillog
maillog_file_prefixes = {base}
smtpd_peername_lookup = no
virtual_mailbox_domains = {AUTHSERV_ID}
virtual_transport = lmtp:inet:127.0.0.1:{lmtp_port}
smtpd_recipient_restrictions = check_policy_service unix:private/policyd-spf, permit_auth_destination, reject
policyd-spf_time_limit = 3600
smtpd_milters = inet:127.0.0.1:{verify_port}, inet:127.0.0.1:{dmarc_port}
milter_default_action = tempfail
""")
    (base / "etc" / "master.cf").write_text(
        f"127.0.0.1:{port}\tinet n - n - - smtpd\n"
        "cleanup unix n - n - 0 cleanup\nqmgr unix n - n 300 1 qmgr\nrewrite unix - - n - - trivial-rewrite\n"
        "bounce unix - - n - 0 bounce\ndefer unix - - n - 0 bounce\ntrace unix - - n - 0 bounce\n"
        "verify unix - - n - 1 verify\nflush unix n - n 1000? 0 flush\nproxymap unix - - n - - proxymap\n"
        "showq unix n - n - - showq\nerror unix - - n - - error\nretry unix - - n - - error\n"
        "discard unix - - n - - discard\nanvil unix - - n - 1 anvil\nscache unix - - n - 1 scache\n"
        "postlog unix-dgram n - n - 1 postlogd\nlmtp unix - - n - - lmtp\nsmtp unix - - n - - smtp\n"
        f"policyd-spf unix - n n - 0 spawn user=nobody argv=/usr/bin/policyd-spf {base}/policyd-spf.conf\n")
    started = subprocess.run(_in_namespace(resolv, ["/usr/sbin/postfix", "-c", str(base / "etc"), "start"]),
                             capture_output=True, text=True)
    if started.returncode != 0:
        log = (base / "maillog").read_text(errors="replace") if (base / "maillog").exists() else ""
        raise RuntimeError(f"the receiving postfix did not start: {started.stdout}{started.stderr}{log}")
    return base
