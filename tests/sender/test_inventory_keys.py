"""The sender agent's inventory keys: settings read, secrets kept out, bad values named with file:line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from toolkit.inventory import load_inventory

HOSTS = "  children:\n    senders:\n      hosts: {}\n"


def _inventory(tmp_path: Path, global_vars: str = "", mailbox: str = "") -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text("all:\n  vars:\n" + global_vars +
                    "    sendhost_mailboxes:\n      - address: a@ex.com\n        domain: ex.com\n"
                    "        start: '2026-11-01'\n" + mailbox + HOSTS)
    return path


def test_sender_settings_are_read(tmp_path: Path) -> None:
    inventory = load_inventory(_inventory(
        tmp_path,
        "    sendhost_database_url: postgresql://sendhost@db.internal/sendhost\n"
        "    sendhost_unsubscribe_base_url: https://u.ex.com/\n",
        "        min_gap_s: 0\n        jitter_s: [5, 30]\n"
        "        smtp: {host: smtp.gmail.com, security: starttls, username: a@ex.com,\n"
        "               password_env: SENDHOST_SECRET_A_PW}\n"))
    (mailbox,) = inventory.mailboxes
    assert inventory.database_url == "postgresql://sendhost@db.internal/sendhost"
    assert inventory.unsubscribe_base_url == "https://u.ex.com"
    assert (mailbox.min_gap_s, mailbox.jitter_s) == (0.0, (5.0, 30.0))
    assert mailbox.smtp is not None
    assert (mailbox.smtp.port, mailbox.smtp.credential.password_env) == (587, "SENDHOST_SECRET_A_PW")


@pytest.mark.parametrize(("mailbox", "expected"), [
    ("        smtp: {host: smtp.gmail.com, username: a@ex.com, password: hunter2}\n",
     "never put a password in the inventory"),
    ("        smtp: {host: smtp.gmail.com, security: none, username: a@ex.com, password_env: SENDHOST_SECRET_X}\n",
     "allowed only for a loopback host"),
    ("        smtp: {host: smtp.gmail.com, username: a@ex.com}\n", "exactly one of password_file or password_env"),
    ("        auth: xoauth2\n", "auth: xoauth2 needs token_file"),
    ("        jitter_s: [30, 5]\n", "0 <= low <= high"),
    ("        min_gap_s: -1\n", "below 0"),
])
def test_bad_mailbox_settings_are_named(tmp_path: Path, mailbox: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as raised:
        load_inventory(_inventory(tmp_path, mailbox=mailbox))
    assert str(raised.value).startswith(f"{tmp_path / 'inventory.yml'}:")


@pytest.mark.parametrize("host", ["localhost.mail.example.com", "127.0.0.1.relay.example.net", "::1.example"])
def test_security_none_refuses_a_name_that_only_starts_like_loopback(tmp_path: Path, host: str) -> None:
    mailbox = (f"        smtp: {{host: '{host}', security: none, username: a@ex.com,\n"
               "               password_env: SENDHOST_SECRET_X}\n")
    with pytest.raises(ConfigError, match="allowed only for a loopback host") as raised:
        load_inventory(_inventory(tmp_path, mailbox=mailbox))
    assert str(raised.value).startswith(f"{tmp_path / 'inventory.yml'}:")


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.3.2.1", "::1"])
def test_security_none_allows_a_loopback_host(tmp_path: Path, host: str) -> None:
    mailbox = (f"        smtp: {{host: '{host}', security: none, username: a@ex.com,\n"
               "               password_env: SENDHOST_SECRET_X}\n")
    (loaded,) = load_inventory(_inventory(tmp_path, mailbox=mailbox)).mailboxes
    assert loaded.smtp is not None and loaded.smtp.host == host


@pytest.mark.parametrize(("global_vars", "expected"), [
    ("    sendhost_database_url: mysql://x\n", "it is not a PostgreSQL URL; use postgresql://"),
    ("    sendhost_database_url: postgresql://u:hun@ter2@db/x\n", "percent-encode them"),
    ("    sendhost_unsubscribe_base_url: http://u.ex.com\n", "expected an https:// URL"),
])
def test_bad_global_settings_are_named(tmp_path: Path, global_vars: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_inventory(_inventory(tmp_path, global_vars))


def _oauth_mailbox(oauth: str, smtp_extra: str = "") -> str:
    return ("        smtp:\n          host: smtp.gmail.com\n          username: a@ex.com\n          auth: oauth2\n"
            + smtp_extra + "          oauth: " + oauth + "\n")


def _token_file(tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / "a.refresh"
    path.write_text("1//refresh\n")
    path.chmod(mode)
    return path


def test_oauth_providers_imply_their_token_url_and_scope(tmp_path: Path) -> None:
    token = _token_file(tmp_path)
    google = load_inventory(_inventory(tmp_path, mailbox=_oauth_mailbox(
        f"{{provider: google, client_id: cid, client_secret_env: SENDHOST_SECRET_G, refresh_token_file: {token}}}")))
    (mailbox,) = google.mailboxes
    assert mailbox.smtp is not None and mailbox.smtp.credential.auth == "oauth2"
    oauth = mailbox.smtp.credential.oauth
    assert oauth is not None
    assert (oauth.token_url, oauth.scope, oauth.client_secret_env) == (
        "https://oauth2.googleapis.com/token", "https://mail.google.com/", "SENDHOST_SECRET_G")
    microsoft = load_inventory(_inventory(tmp_path, mailbox=_oauth_mailbox(
        f"{{provider: microsoft, tenant: contoso.com, client_id: cid, refresh_token_file: {token}}}")))
    oauth = microsoft.mailboxes[0].smtp.credential.oauth  # type: ignore[union-attr]
    assert oauth is not None
    assert oauth.token_url == "https://login.microsoftonline.com/contoso.com/oauth2/v2.0/token"
    assert oauth.scope.split() == ["https://outlook.office.com/SMTP.Send",
                                   "https://outlook.office.com/IMAP.AccessAsUser.All", "offline_access"]
    generic = load_inventory(_inventory(tmp_path, mailbox=_oauth_mailbox(
        "{provider: generic, client_id: cid, token_url: 'https://idp.ex.com/token', scope: smtp, "
        f"refresh_token_file: {token}}}")))
    oauth = generic.mailboxes[0].smtp.credential.oauth  # type: ignore[union-attr]
    assert oauth is not None and (oauth.token_url, oauth.scope) == ("https://idp.ex.com/token", "smtp")


def test_the_oauth_provider_follows_the_smtp_preset(tmp_path: Path) -> None:
    token = _token_file(tmp_path)
    path = _inventory(tmp_path, mailbox=(
        "        smtp:\n          provider: microsoft\n          username: a@ex.com\n          auth: oauth2\n"
        f"          oauth: {{client_id: cid, tenant: contoso.com, refresh_token_file: {token}}}\n"))
    (mailbox,) = load_inventory(path).mailboxes
    assert mailbox.smtp is not None and mailbox.smtp.credential.oauth is not None
    oauth = mailbox.smtp.credential.oauth
    assert (mailbox.smtp.host, oauth.provider, oauth.token_url) == (
        "smtp.office365.com", "microsoft", "https://login.microsoftonline.com/contoso.com/oauth2/v2.0/token")
    assert "https://outlook.office.com/SMTP.Send" in oauth.scope.split()


def test_an_oauth_provider_unlike_the_smtp_preset_is_named_with_its_line(tmp_path: Path) -> None:
    token = _token_file(tmp_path)
    path = _inventory(tmp_path, mailbox=_oauth_mailbox(
        f"{{provider: microsoft, client_id: c, refresh_token_file: {token}}}", "          provider: google\n"))
    with pytest.raises(ConfigError, match=r"smtp\.provider is google: write provider: google here or leave it out"
                       ) as raised:
        load_inventory(path)
    assert str(raised.value).startswith(f"{path}:12: sendhost_mailboxes[0].smtp.oauth.provider")


def test_without_a_smtp_preset_the_oauth_provider_is_required(tmp_path: Path) -> None:
    token = _token_file(tmp_path)
    with pytest.raises(ConfigError, match=r"smtp\.oauth\.provider"):
        load_inventory(_inventory(tmp_path, mailbox=_oauth_mailbox(f"{{client_id: c, refresh_token_file: {token}}}")))


@pytest.mark.parametrize(("oauth", "mode", "line", "expected"), [
    ("{provider: yahoo, client_id: c, refresh_token_file: TOKEN}", 0o600, 11, "'yahoo' is not one of google"),
    ("{provider: google, refresh_token_file: TOKEN}", 0o600, 11, "name client_id"),
    ("{provider: generic, client_id: c, scope: s, refresh_token_file: TOKEN}", 0o600, 11, "generic needs token_url"),
    ("{provider: google, client_id: c, refresh_token_file: MISSING}", 0o600, 11,
     "the refresh token is missing; run sendhost mailbox authorize a@ex.com"),
    ("{provider: google, client_id: c, refresh_token_file: TOKEN}", 0o644, 11,
     r"readable by others \(mode 0644\); chmod 600 it or write it anew; run sendhost mailbox authorize a@ex.com"),
    ("{provider: google, client_id: c, refresh_token_file: TOKEN, color: red}", 0o600, 11, "unknown key"),
])
def test_bad_oauth_blocks_are_named_with_their_line_and_fix(tmp_path: Path, oauth: str, mode: int, line: int,
                                                            expected: str) -> None:
    token = _token_file(tmp_path, mode)
    oauth = oauth.replace("MISSING", str(tmp_path / "none")).replace("TOKEN", str(token))
    with pytest.raises(ConfigError, match=expected) as raised:
        load_inventory(_inventory(tmp_path, mailbox=_oauth_mailbox(oauth)), require_refresh_tokens=True)
    assert str(raised.value).startswith(f"{tmp_path / 'inventory.yml'}:{line}: sendhost_mailboxes[0].smtp")


def test_a_controller_loads_an_inventory_whose_refresh_tokens_live_on_the_sending_hosts(tmp_path: Path) -> None:
    path = _inventory(tmp_path, mailbox=_oauth_mailbox(f"{{provider: google, client_id: c, refresh_token_file: "
                                                       f"{tmp_path / 'on-the-host'}}}"))
    (mailbox,) = load_inventory(path).mailboxes
    assert mailbox.address == "a@ex.com"


def test_oauth2_without_an_oauth_block_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="auth: oauth2 needs an oauth block"):
        load_inventory(_inventory(tmp_path, mailbox="        smtp: {host: h, username: a@ex.com, auth: oauth2}\n"))


@pytest.mark.service  # runs the program
def test_a_bad_oauth_block_exits_2_with_one_line(tmp_path: Path) -> None:
    path = _inventory(tmp_path, mailbox=_oauth_mailbox("{provider: google, client_id: c, refresh_token_file: /nope}"))
    sendhost = str(Path(sys.executable).with_name("sendhost"))
    done = subprocess.run([sendhost, "inventory", "check", "--offline", "--tokens", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "run sendhost mailbox authorize a@ex.com" in done.stderr and "Traceback" not in done.stderr
    on_controller = subprocess.run([sendhost, "inventory", "check", "--offline", str(path)],
                                   capture_output=True, text=True, timeout=60)
    assert on_controller.returncode == 0, on_controller.stderr


def test_imap_oauth2_without_an_smtp_grant_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="imap auth: oauth2 uses the smtp oauth block"):
        load_inventory(_inventory(tmp_path, mailbox="        imap: {host: imap.ex.com, username: a@ex.com, "
                                                   "auth: oauth2}\n"))


def test_a_provider_preset_fills_the_server_and_its_limits(tmp_path: Path) -> None:
    """`provider:` fills what its documentation says: server, port, TLS mode, and its sending limits (Google
    Workspace 2,000 messages a day; Microsoft 365 10,000 recipients a day, 30 messages a minute: 2 s apart)."""
    path = tmp_path / "inventory.yml"
    path.write_text(
        "all:\n  vars:\n    sendhost_mailboxes:\n"
        "      - {address: a@ex.com, domain: ex.com, start: '2026-11-01',\n"
        "         smtp: {provider: google, username: a@ex.com, password_env: SENDHOST_SECRET_A},\n"
        "         imap: {}}\n"
        "      - {address: b@ex.com, domain: ex.com, start: '2026-11-01',\n"
        "         smtp: {provider: microsoft, username: b@ex.com, password_env: SENDHOST_SECRET_B}}\n"
        "      - {address: c@ex.com, domain: ex.com, start: '2026-11-01',\n"
        "         smtp: {provider: microsoft, host: smtp-legacy.office365.com, port: 25, daily_limit: 500,\n"
        "                min_gap_s: 6, username: c@ex.com, password_env: SENDHOST_SECRET_C}}\n"
        "      - {address: d@ex.com, domain: ex.com, start: '2026-11-01',\n"
        "         smtp: {host: mail.ex.com, username: d@ex.com, password_env: SENDHOST_SECRET_D}}\n" + HOSTS)
    google, microsoft, explicit, plain = load_inventory(path).mailboxes
    assert google.smtp is not None and microsoft.smtp is not None and explicit.smtp is not None
    assert plain.smtp is not None and google.imap is not None
    assert (google.smtp.host, google.smtp.port, google.smtp.security) == ("smtp.gmail.com", 587, "starttls")
    assert (google.smtp.provider, google.smtp.daily_limit, google.smtp.min_gap_s) == ("google", 2000, 0.0)
    assert google.imap.host == "imap.gmail.com"
    assert (microsoft.smtp.host, microsoft.smtp.port, microsoft.smtp.security) == ("smtp.office365.com", 587,
                                                                                   "starttls")
    assert (microsoft.smtp.daily_limit, microsoft.smtp.min_gap_s) == (10_000, 2.0)
    # explicit keys win over the preset
    assert (explicit.smtp.host, explicit.smtp.port, explicit.smtp.daily_limit, explicit.smtp.min_gap_s) == (
        "smtp-legacy.office365.com", 25, 500, 6.0)
    assert (plain.smtp.provider, plain.smtp.daily_limit, plain.smtp.min_gap_s) == (None, None, 0.0)


def test_an_unknown_provider_is_named_at_its_line(tmp_path: Path) -> None:
    path = _inventory(tmp_path, mailbox="        smtp: {username: a@ex.com, password_env: SENDHOST_SECRET_A,\n"
                                        "               provider: yahoo}\n")
    with pytest.raises(ConfigError) as raised:
        load_inventory(path)
    assert str(raised.value) == (f"{path}:8: sendhost_mailboxes[0].smtp.provider: 'yahoo' is not one of google, "
                                 "microsoft")


def test_the_providers_limits_bound_the_warm_up(tmp_path: Path) -> None:
    """The guard's gap is at least the provider's (Microsoft's 30 a minute: 2 s, over a `min_gap_s: 0`) and its
    ramp never climbs past the provider's daily limit; a ramp below it and a longer gap are the mailbox's own."""
    from warmup.mailboxes import MailboxConfig
    from warmup.schedule import Ramp

    path = tmp_path / "inventory.yml"
    path.write_text(
        "all:\n  vars:\n    sendhost_mailboxes:\n"
        "      - {address: b@ex.com, domain: ex.com, start: '2026-11-01', min_gap_s: 0,\n"
        "         smtp: {provider: microsoft, username: b@ex.com, password_env: SENDHOST_SECRET_B}}\n"
        "      - {address: a@ex.com, domain: ex.com, start: '2026-11-01', min_gap_s: 420,\n"
        "         smtp: {provider: google, username: a@ex.com, password_env: SENDHOST_SECRET_A}}\n" + HOSTS)
    microsoft, google = load_inventory(path).mailboxes
    assert MailboxConfig.of(microsoft, Ramp()).min_gap_ms == 2000
    assert MailboxConfig.of(google, Ramp()).min_gap_ms == 420_000
    assert MailboxConfig.of(google, Ramp(ceiling=5000)).ramp.ceiling == 2000
    assert MailboxConfig.of(google, Ramp(ceiling=40)).ramp == Ramp(ceiling=40)
