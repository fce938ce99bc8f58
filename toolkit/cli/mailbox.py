"""`sendhost mailbox`: a mailbox's own login. `authorize` gets an OAuth mailbox its first refresh token."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from sendhost.errors import ConfigError, OperationFailed
from toolkit.app import App

EXIT_HELP = ("Exit 0 ok; 1 the provider or the submission server refused or could not be reached; 2 bad input or "
             "configuration (the message names it).")


@click.group("mailbox", epilog=EXIT_HELP)
def group() -> None:
    """A mailbox's login: OAuth 2.0 authorization."""


@group.command("authorize")
@click.argument("address")
@click.option("--no-check", is_flag=True, help="Do not open an SMTP session with the new token.")
@click.pass_obj
def authorize(app: App, address: str, no_check: bool) -> None:
    """Get ADDRESS's first refresh token with the device authorization grant (RFC 8628) and write it to its
    refresh_token_file (0600); then open an SMTP session with it (no message is sent)."""
    from sender.oauth.device import DeviceFlowFailed, Prompt
    from sender.oauth.device import authorize as device_flow
    from sender.oauth.files import write_json, write_private
    from sender.oauth.keeper import AccessToken
    from sender.sending.submission import Result, open_session
    from toolkit.config import resolve_inventory_path
    from toolkit.inventory import load_inventory

    setting = resolve_inventory_path(app.inventory_flag, app.env)
    if not setting.value:
        raise ConfigError("no inventory: pass --inventory PATH or set SENDHOST_INVENTORY")
    # The refresh token is what this writes: its file may well be missing.
    inventory = load_inventory(Path(setting.value), require_refresh_tokens=False)
    mailbox = next((m for m in inventory.mailboxes if m.address.lower() == address.lower()), None)
    if mailbox is None:
        raise ConfigError(f"no mailbox {address} in {setting.value}; add it to sendhost_mailboxes")
    server = mailbox.smtp
    if server is None or server.credential.oauth is None:
        raise ConfigError(f"mailbox {address} has no smtp oauth block; set smtp: {{auth: oauth2, oauth: ...}}")
    settings = server.credential.oauth

    def show(prompt: Prompt) -> None:
        click.echo(f"To authorize {mailbox.address}, open {prompt.verification_uri} and enter the code "
                   f"{prompt.user_code} (signed in as {mailbox.address}); waiting up to "
                   f"{prompt.expires_in_s / 60:.0f} minutes.")

    started = time.time()
    try:
        tokens = device_flow(settings, show, env=app.env)
    except DeviceFlowFailed as exc:
        raise OperationFailed(f"mailbox {address}: {exc}") from None
    token_file = Path(settings.refresh_token_file).expanduser()
    token_file.parent.mkdir(parents=True, exist_ok=True)
    write_private(token_file, tokens.refresh_token + "\n")
    # The agents start with this access token instead of spending a refresh.
    write_json(token_file.with_name(token_file.name + ".access"),
               AccessToken(tokens.access_token, started + tokens.expires_in_s, tokens.expires_in_s).as_json())
    click.echo(f"wrote the refresh token to {token_file} (mode 0600)")
    if no_check:
        return
    session = open_session(server, tokens.access_token, source_ip=None, timeout_s=30.0)
    if isinstance(session, Result):
        raise OperationFailed(f"mailbox {address}: the token was granted but {server.host} refused the SMTP login: "
                              f"{session}; check the scope ({settings.scope}) and that SMTP AUTH is on for it")
    session.close()
    click.echo(json.dumps({"mailbox": mailbox.address, "smtp_login": "ok", "host": server.host}))
