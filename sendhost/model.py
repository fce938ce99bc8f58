"""The records a user writes in the inventory, and their defaults, stated once.

A sender host and its pool policy, a sending domain, a mailbox with its submission (SMTP) and IMAP settings and the
credential each logs in with, and how SSH reaches a host. `toolkit.inventory` parses and validates the inventory
into these; every package reads them as they are (none imports `toolkit`). Frozen: a record is never edited in
place, only replaced (`dataclasses.replace`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from sendhost.errors import SecretUnavailable

# --- defaults -------------------------------------------------------------------------------------------------
# A mailbox sends at most once per MIN_GAP_S plus its own jitter, drawn once per mailbox within JITTER_S (seconds):
# a 16-process sender once sent 6 mails in 2 s against a 7-minute gap.
MIN_GAP_S = 420.0
JITTER_S = (0.0, 90.0)
DEFAULT_GROUP = "default"
DEFAULT_TIMEZONE = "UTC"
# Each Elastic IP retires after a random number of sends in BUDGET, then stays allocated (parked) PARK_MINUTES so
# AWS cannot hand it straight back.
BUDGET = (8, 15)
PARK_MINUTES = 15
# The value of every EIP's `sendhost:pool` tag (`sendhost_pool_name`).
DEFAULT_POOL_NAME = "sendhost"

SMTP_SECURITY = ("starttls", "tls", "none")  # none: loopback hosts only
SMTP_PORT = {"starttls": 587, "tls": 465, "none": 587}
IMAP_SECURITY = ("tls", "starttls")
IMAP_PORT = {"tls": 993, "starttls": 143}
IMAP_FOLDER = "INBOX"
# The authserv-id a provider writes its Authentication-Results under (RFC 8601), by its IMAP host: what
# `imap.authserv_id` defaults to. Only providers whose id is one fixed name: Microsoft 365 and Outlook.com write
# theirs without any id, Yahoo's and Fastmail's name the receiving host, so those mailboxes set it or go without.
AUTHSERV_ID_PRESETS = {"imap.gmail.com": "mx.google.com"}
AUTH_METHODS = ("password", "xoauth2", "oauth2")  # xoauth2: a static token file; oauth2: refreshed by the agent
OAUTH_PROVIDERS = ("google", "microsoft", "generic")
# What `provider: google|microsoft` implies (`generic` names both). Microsoft's URL takes the tenant (a directory
# id or domain; `common` lets any work account sign in); its scopes cover SMTP and IMAP and ask for a refresh token.
OAUTH_TOKEN_URLS = {"google": "https://oauth2.googleapis.com/token",
                    "microsoft": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"}
OAUTH_SCOPES = {"google": "https://mail.google.com/",
                "microsoft": "https://outlook.office.com/SMTP.Send https://outlook.office.com/IMAP.AccessAsUser.All "
                             "offline_access"}
DEFAULT_OAUTH_TENANT = "common"
DMARC_FLOORS = ("none", "quarantine", "reject")
DEFAULT_DMARC_FLOOR = "none"
SENDING_MODES = ("submission", "direct")  # submission: through the mailbox provider; direct: own MTA to MX
DEFAULT_SENDING_MODE = "submission"
SSH_PORT = 22
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
# The names an inventory may give a secret's environment variable (`password_env`): the sender_agent role writes
# each into the agent's environment file, so a name the agent, Python or the dynamic loader reads
# (SENDHOST_REDIS_URL, PYTHONPATH, LD_PRELOAD, HTTPS_PROXY...) would change how the agent runs. None of those, and
# nothing sendhost reads, starts with SENDHOST_SECRET_ (a test holds it so).
SECRET_ENV_PREFIX = "SENDHOST_SECRET_"
SECRET_ENV_PATTERN = rf"{SECRET_ENV_PREFIX}[A-Z0-9_]+"


# --- mailboxes ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OAuthSettings:
    """How the agent gets a mailbox's access tokens: the refresh-token grant at `token_url`, as `client_id`, with
    the refresh token kept (and rotated) in `refresh_token_file` (0600). `sendhost mailbox authorize` writes it."""

    provider: str  # one of OAUTH_PROVIDERS
    client_id: str
    token_url: str
    scope: str
    refresh_token_file: str
    client_secret_env: str | None = None  # None: a public client (no secret)
    tenant: str | None = None  # microsoft only
    device_authorization_url: str | None = None  # generic: RFC 8628's endpoint; None: from RFC 8414 metadata
    authorization_url: str | None = None  # generic: the loopback flow's sign-in page; None: from RFC 8414 metadata

    def client_secret(self, env: Mapping[str, str] | None = None) -> str | None:
        if self.client_secret_env is None:
            return None
        value = (env if env is not None else os.environ).get(self.client_secret_env)
        if not value:
            raise SecretUnavailable(f"environment variable {self.client_secret_env} (oauth client_secret_env) is "
                                    "not set; set it to the OAuth client's secret")
        return value


@dataclass(frozen=True)
class Credential:
    """Where one login of a mailbox finds its secret, read at each connection and never kept: a password in a 0600
    file or an environment variable, or (auth xoauth2) an access token in a file something else refreshes."""

    mailbox: str  # whose login: every error names it
    service: str = "smtp"  # smtp | imap: the settings that name it, where the fix goes
    auth: str = "password"  # password | xoauth2 | oauth2
    password_file: str | None = None
    password_env: str | None = None
    token_file: str | None = None  # xoauth2: the access token's file
    oauth: OAuthSettings | None = None  # oauth2: the agent's token keeper (sender.oauth) gets the access token

    def secret(self, env: Mapping[str, str] | None = None) -> str:
        """The password (for xoauth2, the access token); SecretUnavailable naming the mailbox and the fix."""
        if self.auth == "xoauth2":
            return self._read(self.token_file, "token_file", "the mailbox (auth: xoauth2)")
        if self.auth == "oauth2":
            raise SecretUnavailable(f"mailbox {self.mailbox}: auth oauth2 takes its access token from the token "
                                    "keeper (sender.oauth.TokenKeeper), not from a file")
        if self.password_env:
            value = (env if env is not None else os.environ).get(self.password_env)
            if not value:
                raise SecretUnavailable(f"environment variable {self.password_env} ({self.service} password_env of "
                                        f"{self.mailbox}) is not set; set it or use password_file")
            return value
        return self._read(self.password_file, "password_file", f"the mailbox's {self.service} settings")

    def _read(self, path: str | None, what: str, where: str) -> str:
        if not path:
            raise SecretUnavailable(f"mailbox {self.mailbox}: no {what} configured; add it to {where}")
        named = f"{self.service} {what} {path} of {self.mailbox}"
        try:
            with open(path, encoding="utf-8") as handle:
                value = handle.read().strip()
        except OSError as exc:
            raise SecretUnavailable(f"{named}: {exc.strerror}; write the secret there (mode 0600)") from None
        if not value:
            raise SecretUnavailable(f"{named} is empty; write the secret there (mode 0600)")
        return value


@dataclass(frozen=True)
class Submission:
    """Where and how a mailbox submits: its provider's submission server (587 STARTTLS or 465 TLS), authenticated
    as the mailbox, the certificate verified (against `ca_file` for a private CA)."""

    host: str
    port: int
    security: str  # one of SMTP_SECURITY
    username: str
    credential: Credential
    ca_file: str | None = None
    # The provider (a key of sendhost.providers.PROVIDER_PRESETS) and its documented sending limits, which bound
    # the warm-up's: at most `daily_limit` sends a day (None: no bound), at least `min_gap_s` between two.
    provider: str | None = None
    daily_limit: int | None = None
    min_gap_s: float = 0.0


@dataclass(frozen=True)
class ImapSettings:
    """Where the inbox reader reads a mailbox's bounces and replies: IMAP over TLS (993) or STARTTLS (143), the
    certificate verified. The inventory defaults username, secret and CA file to the mailbox's smtp ones.
    `sent_folder` is where `sendhost sender unconfirmed --look` looks for a copy of a send; None: the folder the
    server marks \\Sent (RFC 6154), else one with a usual name ("Sent", "Sent Items", ...)."""

    host: str
    port: int
    security: str  # one of IMAP_SECURITY
    username: str
    credential: Credential
    ca_file: str | None = None
    folder: str = IMAP_FOLDER
    sent_folder: str | None = None
    # The provider's own Authentication-Results id: only headers under it are believed (sender.feedback.
    # authentication); None: no verdict is read, every message's is `none`.
    authserv_id: str | None = None


@dataclass(frozen=True)
class Mailbox:
    """A mailbox under warm-up: when it started, its day's time zone, the group it sends in, its gap between sends,
    and (for the sender agent and the inbox reader) how it submits and where its inbox is read."""

    address: str
    domain: str
    start: date
    timezone: str = DEFAULT_TIMEZONE
    group: str = DEFAULT_GROUP
    min_gap_s: float = MIN_GAP_S
    jitter_s: tuple[float, float] = JITTER_S
    smtp: Submission | None = None
    imap: ImapSettings | None = None


@dataclass(frozen=True)
class Domain:
    """A sending domain: what its DNS must hold (DKIM selectors, SPF includes, a DMARC policy at least this strict)
    and how its mail leaves."""

    name: str
    dkim_selectors: tuple[str, ...] = ()
    envelope_domain: str | None = None
    spf_includes: tuple[str, ...] = ()
    dmarc_floor: str = DEFAULT_DMARC_FLOOR  # one of DMARC_FLOORS
    sending_mode: str = DEFAULT_SENDING_MODE  # one of SENDING_MODES
    line: int = 0  # the inventory line declaring it (audit reports point at it)


# --- placement seeds --------------------------------------------------------------------------------------------

# The providers a seed may name: where its receiving side's verdicts and folders come from. `other` for any.
SEED_PROVIDERS = ("google", "microsoft", "yahoo", "other")
# The spam folder's usual names by provider, when the server marks none \\Junk (RFC 6154).
SPAM_FOLDER_NAMES = {"google": ("[Gmail]/Spam",), "microsoft": ("Junk Email", "Junk"),
                     "yahoo": ("Bulk", "Bulk Mail", "Spam"), "other": ("Junk", "Spam", "Junk Email", "Bulk")}
# A placement test's inbox share below which a mailbox is rested (`sendhost_placement.rest_below`; None: never).
DEFAULT_PLACEMENT_TESTS = 3  # the last tests per provider an inbox share is taken over


@dataclass(frozen=True)
class Seed:
    """A mailbox of our own at a provider our leads use, that placement tests send to and read by IMAP (never a
    lead, never in a warm-up group): its address, its provider and how its folders are read."""

    address: str
    provider: str  # one of SEED_PROVIDERS
    imap: ImapSettings


@dataclass(frozen=True)
class PlacementPolicy:
    """When placement tests rest a mailbox: its inbox share over its last `tests` per provider below `rest_below`
    halves its warm-up ramp (or, with `pause`, pauses it) until a test at or above it, or `warmup resume`."""

    rest_below: float | None = None
    pause: bool = False
    tests: int = DEFAULT_PLACEMENT_TESTS


# --- hosts ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolPolicy:
    """A host's Elastic IP pool: how many slots, each address's send budget, how long a retired one stays parked,
    and whether each new address gets reverse DNS."""

    slots: int
    budget: tuple[int, int] = BUDGET
    park_minutes: float = PARK_MINUTES  # whole minutes in the inventory
    ptr: bool = False
    ptr_zone: str | None = None  # Route 53 hosted zone for the forward A records when ptr is on
    private_ips: tuple[str, ...] = ()  # slot n's private IP is private_ips[n]; (): AWS picks them


@dataclass(frozen=True)
class SenderHost:
    """An EC2 instance that sends: where it is, its primary address (the fallback when no slot is leasable) and
    its pool."""

    name: str
    instance_id: str
    region: str
    primary_ip: str
    pool: PoolPolicy
    ansible_host: str | None = None  # the address Ansible and SSH reach it on (the inventory defaults it)
    subnet: str | None = None  # the slots' private IPs must lie in it
    interface: str | None = None  # None: the host's default-route interface (from facts), never a guess
    # The warm-up groups whose mailboxes it sends for (its Redis user writes only their keys); None: every group.
    mailbox_groups: tuple[str, ...] | None = None

    @property
    def forward_zone(self) -> str | None:
        """The Route 53 zone of the forward A records its addresses' PTRs need; None when the pool sets no PTR."""
        return self.pool.ptr_zone if self.pool.ptr else None


@dataclass(frozen=True)
class SshTarget:
    """How SSH reaches one host: the inventory's Ansible connection variables, resolved the way Ansible does."""

    name: str
    address: str | None  # ansible_host
    port: int  # ansible_port, else SSH_PORT
    user: str  # ansible_user, else (as Ansible does) whoever runs it
    key_file: Path | None  # ansible_ssh_private_key_file
    known_hosts: Path  # UserKnownHostsFile from ansible_ssh_common_args, else DEFAULT_KNOWN_HOSTS


# --- the provider's spam rate ------------------------------------------------------------------------------------

POSTMASTER_API_URL = "https://gmailpostmastertools.googleapis.com"
POSTMASTER_SCOPE = "https://www.googleapis.com/auth/postmaster.readonly"  # read-only: the one it needs
POSTMASTER_DAYS = 14  # days read back at each sync: Google revises a day's figures for a day or two


@dataclass(frozen=True)
class PostmasterSettings:
    """How `sendhost postmaster sync` reads Google Postmaster Tools (`sendhost_postmaster`): as a Google account, an
    OAuth grant like a mailbox's (`oauth`, scope POSTMASTER_SCOPE, `sendhost postmaster authorize` writes its
    refresh token), or as a service account (`service_account_key_file`, acting for `subject` when set)."""

    oauth: OAuthSettings | None = None
    service_account_key_file: str | None = None
    subject: str | None = None  # service account: the user it acts for (domain-wide delegation); None: itself
    domains: tuple[str, ...] = ()  # the domains read; empty: every domain of sendhost_domains
    api_url: str = POSTMASTER_API_URL
    days: int = POSTMASTER_DAYS
