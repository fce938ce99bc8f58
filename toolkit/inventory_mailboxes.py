"""The inventory's mailboxes and domains (`sendhost_mailboxes`, `sendhost_domains`): each entry's keys, how it submits
(SMTP, OAuth 2.0) and how its inbox is read (IMAP); every failure names file:line, the key path and what is expected.
toolkit.inventory reads the rest of the file and calls these."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import fields
from typing import Any

from sendhost.model import (
    AUTH_METHODS,
    AUTHSERV_ID_PRESETS,
    DEFAULT_DMARC_FLOOR,
    DEFAULT_GROUP,
    DEFAULT_OAUTH_TENANT,
    DEFAULT_SENDING_MODE,
    DEFAULT_TIMEZONE,
    DMARC_FLOORS,
    IMAP_FOLDER,
    IMAP_PORT,
    IMAP_SECURITY,
    JITTER_S,
    MIN_GAP_S,
    OAUTH_PROVIDERS,
    OAUTH_SCOPES,
    OAUTH_TOKEN_URLS,
    SENDING_MODES,
    SMTP_PORT,
    SMTP_SECURITY,
    Credential,
    Domain,
    ImapSettings,
    Mailbox,
    OAuthSettings,
    Submission,
)
from sendhost.private_paths import refresh_token_file_problem
from sendhost.providers import PROVIDER_PRESETS, PROVIDERS, ProviderPreset
from toolkit.inventory_schema import Checker
from toolkit.yaml_lines import LineDict


def field_names(record: type) -> set[str]:
    return {f.name for f in fields(record)}


DOMAIN_KEYS = field_names(Domain) - {"line"}
# A mailbox's auth and token_file are its smtp credential's (the agent's); its imap settings are the inbox reader's.
MAILBOX_KEYS = field_names(Mailbox) | {"auth", "token_file"}


def domain_record(check: Checker, index: int, node: object) -> Domain:
    where = f"sendhost_domains[{index}]"
    entry = check.entry(node, where)
    check.known_keys(entry, DOMAIN_KEYS, where)
    return Domain(
        name=check.domain(entry, "name", f"{where}.name"),
        dkim_selectors=tuple(check.str_list(entry, "dkim_selectors", f"{where}.dkim_selectors", default=[])),
        envelope_domain=check.domain(entry, "envelope_domain", f"{where}.envelope_domain", default="") or None,
        spf_includes=tuple(check.str_list(entry, "spf_includes", f"{where}.spf_includes", default=[])),
        dmarc_floor=check.choice(entry, "dmarc_floor", f"{where}.dmarc_floor", DMARC_FLOORS,
                                 default=DEFAULT_DMARC_FLOOR),
        sending_mode=check.choice(entry, "sending_mode", f"{where}.sending_mode", SENDING_MODES,
                                  default=DEFAULT_SENDING_MODE),
        line=check.line_of(entry, "name"),
    )


def mailbox_record(check: Checker, index: int, node: object) -> Mailbox:
    where = f"sendhost_mailboxes[{index}]"
    entry = check.entry(node, where)
    check.known_keys(entry, MAILBOX_KEYS, where)
    address = check.email(entry, "address", f"{where}.address")
    domain = check.domain(entry, "domain", f"{where}.domain")
    # The mailbox's `domain` picks the DNS audited for it and the warm-up group it sends in; a From address in
    # another domain would be audited against the wrong records, so the two must agree.
    address_domain = ascii_domain(address.rpartition("@")[2])
    if address_domain != domain:
        check.fail(entry, "domain", f"{where}.domain",
                   f"mailbox {address} is in domain {address_domain}, not {domain}; "
                   f"set domain: {address_domain} or fix the address")
    return Mailbox(
        address=address,
        domain=domain,
        start=check.iso_date(entry, "start", f"{where}.start"),
        timezone=check.timezone(entry, "timezone", f"{where}.timezone", default=DEFAULT_TIMEZONE),
        group=check.string(entry, "group", f"{where}.group", default=DEFAULT_GROUP),
        **_mailbox_sending(check, where, entry, address),
    )


def ascii_domain(name: str) -> str:
    try:
        return name.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        return name.rstrip(".").lower()


def check_mailboxes(check: Checker, global_vars: LineDict, mailboxes: tuple[Mailbox, ...],
                     domains: tuple[Domain, ...]) -> None:
    names = {d.name for d in domains}
    seen: set[str] = set()
    for mailbox in mailboxes:
        if mailbox.address in seen:
            check.fail(global_vars, "sendhost_mailboxes", "sendhost_mailboxes",
                       f"mailbox {mailbox.address} is listed twice; keep one")
        seen.add(mailbox.address)
        if names and mailbox.domain not in names:
            check.fail(global_vars, "sendhost_mailboxes", "sendhost_mailboxes",
                       f"mailbox {mailbox.address} names domain {mailbox.domain}, which is not in sendhost_domains")


CREDENTIAL_KEYS = {"password_file", "password_env"}
SMTP_KEYS = field_names(Submission) - {"credential"} | CREDENTIAL_KEYS | {"auth", "oauth"}
OAUTH_KEYS = field_names(OAuthSettings)


def is_loopback_host(host: str) -> bool:
    """Exactly `localhost` or an IP literal in 127.0.0.0/8 or ::1. A prefix test let `localhost.mail.example.com`
    and `127.0.0.1.relay.example.net` (names anyone can register) take the password in clear."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _mailbox_sending(check: Checker, where: str, entry: LineDict, address: str) -> dict[str, Any]:
    """The sender agent's settings of one mailbox: gap, jitter, submission server and authentication."""
    gap = check.number(entry, "min_gap_s", f"{where}.min_gap_s", default=MIN_GAP_S, minimum=0.0)
    jitter = check.number_pair(entry, "jitter_s", f"{where}.jitter_s", default=JITTER_S)
    auth = check.choice(entry, "auth", f"{where}.auth", AUTH_METHODS, default="password")
    token_file = check.string(entry, "token_file", f"{where}.token_file", default="") or None
    if auth == "xoauth2" and token_file is None:
        check.fail(entry, "auth", f"{where}.auth", "auth: xoauth2 needs token_file (a file holding the access token)")
    smtp = None
    if "smtp" in entry:
        node = check.mapping(entry, "smtp", f"{where}.smtp")
        if "password" in node:
            check.fail(node, "password", f"{where}.smtp.password", "never put a password in the inventory; use "
                       "password_file (a 0600 file) or password_env")
        check.known_keys(node, SMTP_KEYS, f"{where}.smtp")
        preset = None
        if "provider" in node:
            preset = PROVIDER_PRESETS[check.choice(node, "provider", f"{where}.smtp.provider", PROVIDERS)]
        security = check.choice(node, "security", f"{where}.smtp.security", SMTP_SECURITY,
                                default=preset.smtp_security if preset else "starttls")
        host = check.string(node, "host", f"{where}.smtp.host", **({"default": preset.smtp_host} if preset else {}))
        if security == "none" and not is_loopback_host(host):
            check.fail(node, "security", f"{where}.smtp.security",
                       f"security: none sends the password in clear; allowed only for a loopback host, not {host!r}; "
                       "use localhost, 127.0.0.1 or ::1, or security: starttls")
        port = check.integer(node, "port", f"{where}.smtp.port",
                             default=preset.smtp_port if preset and security == preset.smtp_security
                             else SMTP_PORT[security], minimum=1, maximum=65535)
        limit = (check.integer(node, "daily_limit", f"{where}.smtp.daily_limit", minimum=1) if "daily_limit" in node
                 else preset.daily_limit if preset else None)
        floor = check.number(node, "min_gap_s", f"{where}.smtp.min_gap_s",
                             default=preset.min_gap_s if preset else 0.0, minimum=0.0)
        password_file = check.string(node, "password_file", f"{where}.smtp.password_file", default="") or None
        password_env = check.secret_env(node, "password_env", f"{where}.smtp.password_env")
        if "auth" in node:
            smtp_auth = check.choice(node, "auth", f"{where}.smtp.auth", AUTH_METHODS)
            if "auth" in entry and smtp_auth != auth:
                check.fail(node, "auth", f"{where}.smtp.auth", f"the mailbox says auth: {auth}; keep one of the two")
            auth = smtp_auth
        if auth == "password" and (password_file is None) == (password_env is None):
            check.fail(node, "host", f"{where}.smtp", "name exactly one of password_file or password_env")
        oauth = oauth_settings(check, f"{where}.smtp", node, address, preset) if auth == "oauth2" else None
        if oauth is None and "oauth" in node:
            check.fail(node, "oauth", f"{where}.smtp.oauth", "an oauth block needs auth: oauth2 beside it")
        credential = Credential(address, "smtp", auth, password_file=password_file, password_env=password_env,
                                token_file=token_file, oauth=oauth)
        smtp = Submission(host=host, port=port, security=security,
                          username=check.string(node, "username", f"{where}.smtp.username"), credential=credential,
                          ca_file=check.string(node, "ca_file", f"{where}.smtp.ca_file", default="") or None,
                          provider=preset.name if preset else None, daily_limit=limit, min_gap_s=floor)
    imap = _mailbox_imap(check, where, entry, address, smtp)
    return {"min_gap_s": gap, "jitter_s": jitter, "smtp": smtp, "imap": imap}


def oauth_settings(check: Checker, where: str, node: LineDict, address: str,
                   preset: ProviderPreset | None) -> OAuthSettings:
    """A mailbox's `smtp.oauth` block: its provider (default: the smtp preset's), the provider's implied token URL
    and scope, the refresh token's file present and private (the agent refreshes with it; `sendhost mailbox
    authorize` writes it)."""
    if "oauth" not in node:
        check.fail(node, "auth", f"{where}.auth", "auth: oauth2 needs an oauth block: {provider: google|microsoft|"
                   "generic, client_id: ..., refresh_token_file: ...}")
    block = check.mapping(node, "oauth", f"{where}.oauth")
    where = f"{where}.oauth"
    check.known_keys(block, OAUTH_KEYS, where)
    provider = check.choice(block, "provider", f"{where}.provider", OAUTH_PROVIDERS,
                            **({"default": preset.name} if preset else {}))
    if preset is not None and provider != preset.name:
        # The preset's server only takes its own provider's tokens: a mismatch can never log in.
        check.fail(block, "provider", f"{where}.provider", f"smtp.provider is {preset.name}: write provider: "
                   f"{preset.name} here or leave it out (it follows smtp.provider)")
    client_id = check.string(block, "client_id", f"{where}.client_id", default="")
    if not client_id:
        check.fail(block, "provider", f"{where}.client_id", "name client_id (the OAuth client registered with "
                   f"{provider} for sendhost)")
    tenant = check.string(block, "tenant", f"{where}.tenant", default="") or None
    if tenant is not None and provider != "microsoft":
        check.fail(block, "tenant", f"{where}.tenant", "tenant is a Microsoft setting; remove it")
    implied_url = OAUTH_TOKEN_URLS.get(provider, "").replace("{tenant}", tenant or DEFAULT_OAUTH_TENANT)
    token_url = check.string(block, "token_url", f"{where}.token_url", default=implied_url)
    scope = check.string(block, "scope", f"{where}.scope", default=OAUTH_SCOPES.get(provider, ""))
    for key, value in (("token_url", token_url), ("scope", scope)):
        if not value:
            check.fail(block, "provider", f"{where}.{key}", f"provider: generic needs {key}")
    if not token_url.startswith(("https://", "http://127.", "http://localhost")):
        check.fail(block, "token_url", f"{where}.token_url", f"{token_url!r} is not an https:// URL")
    refresh_token_file = check.string(block, "refresh_token_file", f"{where}.refresh_token_file")
    if check.require_refresh_tokens and (problem := refresh_token_file_problem(refresh_token_file)):
        check.fail(block, "refresh_token_file", f"{where}.refresh_token_file",
                   f"{problem}; run sendhost mailbox authorize {address}")
    return OAuthSettings(provider=provider, client_id=client_id, token_url=token_url, scope=scope,
                         refresh_token_file=refresh_token_file, tenant=tenant,
                         device_authorization_url=check.string(block, "device_authorization_url",
                                                               f"{where}.device_authorization_url", default="") or None,
                         authorization_url=check.string(block, "authorization_url", f"{where}.authorization_url",
                                                        default="") or None,
                         client_secret_env=check.secret_env(block, "client_secret_env", f"{where}.client_secret_env"))


IMAP_KEYS = field_names(ImapSettings) - {"credential"} | CREDENTIAL_KEYS | {"auth"}
IMAP_AUTH_METHODS = ("password", "oauth2")


def _mailbox_imap(check: Checker, where: str, entry: LineDict, address: str,
                  smtp: Submission | None) -> ImapSettings | None:
    """The inbox reader's settings of one mailbox; username and secret (an OAuth grant too) default to its smtp
    ones."""
    if "imap" not in entry:
        return None
    node = check.mapping(entry, "imap", f"{where}.imap")
    if "password" in node:
        check.fail(node, "password", f"{where}.imap.password", "never put a password in the inventory; use "
                   "password_file (a 0600 file) or password_env")
    check.known_keys(node, IMAP_KEYS, f"{where}.imap")
    password_file = check.string(node, "password_file", f"{where}.imap.password_file", default="") or None
    password_env = check.secret_env(node, "password_env", f"{where}.imap.password_env")
    smtp_oauth = smtp.credential.oauth if smtp is not None else None
    # An OAuth mailbox's inbox logs in with the same grant (its scope covers both) unless it names a password.
    auth = check.choice(node, "auth", f"{where}.imap.auth", IMAP_AUTH_METHODS, default="oauth2" if (
        smtp_oauth is not None and password_file is None and password_env is None) else "password")
    if auth == "oauth2":
        if smtp_oauth is None:
            check.fail(node, "auth", f"{where}.imap.auth", "imap auth: oauth2 uses the smtp oauth block; give smtp "
                       "auth: oauth2 and an oauth block")
        if password_file is not None or password_env is not None:
            check.fail(node, "auth", f"{where}.imap.auth", "auth: oauth2 takes no password; remove password_file "
                       "and password_env")
        return _imap_settings(check, node, where, smtp,
                              Credential(address, "imap", "oauth2", oauth=smtp_oauth))
    if password_file is not None and password_env is not None:
        check.fail(node, "password_env", f"{where}.imap", "name at most one of password_file or password_env")
    if password_file is None and password_env is None:
        if smtp is None or (smtp.credential.password_file is None and smtp.credential.password_env is None):
            check.fail(node, "host", f"{where}.imap", "name password_file or password_env (there is no smtp "
                       "secret to default to)")
        assert smtp is not None
        password_file, password_env = smtp.credential.password_file, smtp.credential.password_env
    return _imap_settings(check, node, where, smtp,
                          Credential(address, "imap", password_file=password_file, password_env=password_env))


def _imap_settings(check: Checker, node: LineDict, where: str, smtp: Submission | None,
                   credential: Credential) -> ImapSettings:
    """Where the inbox is and how it is read, whatever `credential` logs in with."""
    security = check.choice(node, "security", f"{where}.imap.security", IMAP_SECURITY, default="tls")
    port = check.integer(node, "port", f"{where}.imap.port", default=IMAP_PORT[security], minimum=1, maximum=65535)
    username = check.string(node, "username", f"{where}.imap.username", default="") or (
        smtp.username if smtp is not None else "")
    if not username:
        check.fail(node, "host", f"{where}.imap", "name username (there is no smtp username to default to)")
    preset = PROVIDER_PRESETS.get(smtp.provider) if smtp is not None and smtp.provider else None
    host = check.string(node, "host", f"{where}.imap.host", **({"default": preset.imap_host} if preset else {}))
    return ImapSettings(host=host, port=port, security=security, username=username, credential=credential,
                        ca_file=check.string(node, "ca_file", f"{where}.imap.ca_file", default="") or (
                            smtp.ca_file if smtp is not None else None),
                        folder=check.string(node, "folder", f"{where}.imap.folder", default=IMAP_FOLDER),
                        sent_folder=check.string(node, "sent_folder", f"{where}.imap.sent_folder", default="") or None,
                        authserv_id=authserv_id(check, node, f"{where}.imap.authserv_id", host))


# RFC 8601's authserv-id is a `value` (a token or a quoted string); providers use a host name. No spaces, no `;`.
_AUTHSERV_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")


def authserv_id(check: Checker, node: LineDict, where: str, host: str) -> str | None:
    """The provider's Authentication-Results id: as written, else its preset by IMAP host, else None."""
    value = check.string(node, "authserv_id", where, default="")
    if not value:
        return AUTHSERV_ID_PRESETS.get(host.lower().rstrip("."))
    if not _AUTHSERV_ID.match(value):
        check.fail(node, "authserv_id", where, f"{value!r} is not an authserv-id; write the name the provider puts "
                   "first in its Authentication-Results headers, like mx.google.com")
    return value
