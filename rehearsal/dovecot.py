"""Debian's dovecot (dovecot-imapd) with a configuration of its own, run in the foreground (`dovecot -F -c`, no
systemd): IMAPS and IMAP with STARTTLS on loopback ports, TLS from a CA made here, users from a passwd file
(passwords in clear: a rehearsal's), optionally OAuth bearer tokens checked by introspection (RFC 7662), Maildirs.
`sendhost sandbox` runs one; the tests' IMAP server (tests/support/dovecot.py) is the same configuration.

Who runs what: dovecot refuses to run its login processes as root and to give mail to uid 0. Run by an ordinary
user, every process is that user's and everything lives in `private`. Run as root, the login processes run as
Debian's `dovenull` and the mail belongs to `nobody`: those reach only `shared` (0755: the sockets and the Maildirs,
each home 0700 nobody's), while the configuration, the TLS key, the passwords, the state and the log stay in
`private`, which root's own processes (master, config, auth) alone read.
"""

from __future__ import annotations

import datetime
import os
import pwd
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sendhost.private_paths import private_file

IMAP_PROGRAM = Path("/usr/lib/dovecot/imap")  # what dovecot-imapd adds to dovecot-core
ROOT_MAIL_USER = "nobody"
ROOT_LOGIN_USER = "dovenull"  # created by Debian's dovecot-core
INSTALL_HINT = "install dovecot-imapd"


def find_dovecot() -> str | None:
    """dovecot's master binary when dovecot-imapd is installed, else None (/usr/sbin is on no ordinary user's
    PATH on Debian)."""
    found = shutil.which("dovecot") or ("/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None)
    return found if found is not None and IMAP_PROGRAM.exists() else None


@dataclass(frozen=True)
class Layout:
    private: Path  # configuration, TLS, passwords, state, log: root's or the user's alone
    shared: Path  # sockets and Maildirs: reachable by the login and mail users
    mail_uid: int
    mail_gid: int
    login_user: str
    internal_user: str

    @property
    def run_dir(self) -> Path:
        """dovecot's base_dir, where its master works (its cwd)."""
        return self.shared / "run"

    @property
    def config(self) -> Path:
        return self.private / "dovecot.conf"

    @property
    def ca_file(self) -> Path:
        return self.private / "ca.pem"

    @property
    def log(self) -> Path:
        return self.private / "dovecot.log"

    def home(self, user: str) -> Path:
        return self.shared / "home" / user


def layout(private: Path, shared: Path) -> Layout:
    """Who runs dovecot's processes for the user running this (see the module's docstring)."""
    if os.geteuid() == 0:
        mail = pwd.getpwnam(ROOT_MAIL_USER)
        return Layout(private, shared, mail.pw_uid, mail.pw_gid, ROOT_LOGIN_USER, "root")
    own = pwd.getpwuid(os.geteuid())
    return Layout(private, shared, own.pw_uid, own.pw_gid, own.pw_name, own.pw_name)


def prepare(where: Layout, users: Mapping[str, str], imaps_port: int, starttls_port: int, *,
            special_use: Mapping[str, str] | None = None, introspection_url: str | None = None) -> Path:
    """Write the configuration, the TLS files, the users and their homes; the configuration's path.
    `special_use`: folders made for every user with their RFC 6154 attribute (`{"Sent": "\\\\Sent"}`);
    `introspection_url`: also take XOAUTH2 and OAUTHBEARER, each token checked there."""
    (where.private / "state").mkdir(exist_ok=True)
    where.run_dir.mkdir(parents=True, exist_ok=True)
    issue_tls(where.private)
    with private_file(where.private / "users") as fd:
        os.ftruncate(fd, 0)
        os.write(fd, "".join(f"{name}:{{PLAIN}}{password}::::::\n" for name, password in users.items()).encode())
    for name in users:
        home = where.home(name)
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home.parent, where.mail_uid, where.mail_gid)
        os.chown(home, where.mail_uid, where.mail_gid)
        home.chmod(0o700)
    mechanisms, oauth2_passdb = oauth2_settings(where.private, introspection_url)
    text = _config(where, imaps_port, starttls_port, mechanisms, oauth2_passdb) + _namespace(special_use or {})
    with private_file(where.config) as fd:
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    return where.config


def command(binary: str, where: Layout) -> list[str]:
    return [binary, "-F", "-c", str(where.config)]


def issue_tls(directory: Path, hostnames: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Path:
    """A CA of its own (ca.pem, what clients trust) and a server certificate it signed for `hostnames`
    (cert.pem, key.pem 0600); the CA's path."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sendhost rehearsal CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=365))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hostnames:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    with private_file(directory / "key.pem") as fd:
        os.ftruncate(fd, 0)
        os.write(fd, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return directory / "ca.pem"


def _namespace(special_use: Mapping[str, str]) -> str:
    """The inbox namespace with these folders made for every user and marked with their RFC 6154 attribute;
    nothing (dovecot's implicit namespace) without any."""
    if not special_use:
        return ""
    folders = "".join(f'  mailbox "{name}" {{\n    special_use = {use}\n    auto = create\n  }}\n'
                      for name, use in special_use.items())
    return f"namespace inbox {{\n  inbox = yes\n  separator = /\n{folders}}}\n"


def oauth2_settings(private: Path, introspection_url: str | None) -> tuple[str, str]:
    """The mechanisms and the passdb that check OAuth bearer tokens by introspection at `introspection_url`, as a
    provider's IMAP does; passwords still log in through the passwd-file passdb."""
    if introspection_url is None:
        return "", ""
    (private / "oauth2.conf.ext").write_text(
        f"introspection_mode = post\nintrospection_url = {introspection_url}\nforce_introspection = yes\n"
        "username_attribute = username\nactive_attribute = active\nactive_value = true\n")
    return " xoauth2 oauthbearer", f"""passdb {{
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = {private}/oauth2.conf.ext
}}
"""


def _config(where: Layout, imaps: int, starttls: int, mechanisms: str, oauth2_passdb: str) -> str:
    private = where.private
    return f"""
base_dir = {where.run_dir}
state_dir = {private}/state
log_path = {where.log}
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <{private}/cert.pem
ssl_key = <{private}/key.pem
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = yes
auth_mechanisms = plain login{mechanisms}
first_valid_uid = {where.mail_uid}
last_valid_uid = {where.mail_uid}
mail_location = maildir:~/Maildir
default_internal_user = {where.internal_user}
default_login_user = {where.login_user}
{oauth2_passdb}passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {private}/users
}}
userdb {{
  driver = static
  args = uid={where.mail_uid} gid={where.mail_gid} home={where.shared}/home/%u
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
