"""`sendhost mailbox`: a mailbox's own login. `authorize` gets an OAuth mailbox its first refresh token."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sendhost.errors import ConfigError, Interrupted, OperationFailed
from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.output import emit_json, format_option, printable

if TYPE_CHECKING:
    from sendhost.model import Mailbox, OAuthSettings, Seed

EXIT_HELP = ("Exit 0 ok; 1 the provider or the submission server refused or could not be reached; 2 bad input or "
             "configuration (the message names it); 130 Ctrl-C (authorize: nothing written before the token came).")


@click.group("mailbox", cls=WholeHelpGroup, epilog=EXIT_HELP)
def group() -> None:
    """A mailbox's login: OAuth 2.0 authorization, and its SMTP and IMAP sessions checked."""


@group.command("authorize")
@click.argument("address")
@click.option("--flow", type=click.Choice(["device", "loopback"]), default=None,
              help="device: a code typed at the provider's page (RFC 8628); loopback: a browser on this machine "
                   "redirected to 127.0.0.1 (RFC 8252). Default: loopback for google, device for microsoft, and for "
                   "generic device when the server has a device endpoint, else loopback.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Seconds the loopback flow waits for the browser's redirect.")
@click.option("--no-check", is_flag=True, help="Do not open an SMTP session with the new token.")
@click.pass_obj
def authorize(app: App, address: str, flow: str | None, timeout_s: float, no_check: bool) -> None:
    """Get ADDRESS's first refresh token (the device grant or the loopback redirect with PKCE) and write it to its
    refresh_token_file (0600); then open an SMTP session with it (no message is sent). ADDRESS may be a placement
    seed (sendhost_seeds) with an imap oauth block: its IMAP login is checked instead."""
    from sender.sending.submission import Result, open_session

    # The refresh token is what this writes: its file may well be missing.
    seed = _seed(app, address)
    if seed is not None:  # a placement seed: its imap oauth block, checked with an IMAP login
        if seed.imap.credential.oauth is None:
            raise ConfigError(f"seed {address} has no imap oauth block; set imap: {{auth: oauth2, oauth: ...}}")
        imap = seed.imap

        def check_imap_login(access_token: str) -> None:
            from sender.mailbox_check import all_ok, check_imap
            from sender.oauth import TokenKeeper

            steps = check_imap(imap, TokenKeeper(env=app.env))
            if not all_ok(steps):
                failed = next(s for s in steps if s.state.value == "failed")
                raise OperationFailed(f"seed {address}: the token was granted but {imap.host} refused the IMAP "
                                      f"login: {failed}")
            click.echo(json.dumps({"seed": seed.address, "imap_login": "ok", "host": imap.host}))

        _authorize(app, seed.address, seed.imap.credential.oauth, flow, timeout_s,
                   None if no_check else check_imap_login, "IMAP")
        return
    mailbox = _mailbox(app, address, require_refresh_tokens=False)
    server = mailbox.smtp
    if server is None or server.credential.oauth is None:
        raise ConfigError(f"mailbox {address} has no smtp oauth block; set smtp: {{auth: oauth2, oauth: ...}}")
    settings = server.credential.oauth

    def check_smtp_login(access_token: str) -> None:
        session = open_session(server, access_token, source_ip=None, timeout_s=30.0)
        if isinstance(session, Result):
            raise OperationFailed(f"mailbox {address}: the token was granted but {server.host} refused the SMTP "
                                  f"login: {session}; check the scope ({settings.scope}) and that SMTP AUTH is on "
                                  "for it")
        session.close()
        click.echo(json.dumps({"mailbox": mailbox.address, "smtp_login": "ok", "host": server.host}))

    _authorize(app, mailbox.address, settings, flow, timeout_s, None if no_check else check_smtp_login, "SMTP")


def _authorize(app: App, address: str, settings: OAuthSettings, flow: str | None, timeout_s: float,
               check: Callable[[str], None] | None, service: str) -> None:
    """The flow for `address`, its tokens written under the agents' refresh lock, then `check` with the new
    access token (None: no check)."""
    from sender.oauth.device import DeviceFlowFailed, Prompt
    from sender.oauth.device import authorize as device_flow
    from sender.oauth.flows import Flow, default_flow
    from sender.oauth.keeper import save_grant
    from sender.oauth.loopback import LoopbackFlowFailed
    from sender.oauth.loopback import authorize as loopback_flow

    def show(prompt: Prompt) -> None:
        click.echo(f"To authorize {address}, open {prompt.verification_uri} and enter the code "
                   f"{prompt.user_code} (signed in as {address}); waiting up to "
                   f"{prompt.expires_in_s / 60:.0f} minutes.")

    def show_page(url: str, redirect_uri: str) -> None:
        click.echo(f"To authorize {address}, open {url} in a browser on this machine, signed in as "
                   f"{address}; waiting up to {timeout_s:.0f} s for its redirect to {redirect_uri}")
        if _has_display(app.env):
            import webbrowser

            webbrowser.open(url)

    started = time.time()
    try:
        if (Flow(flow) if flow else default_flow(settings)) is Flow.LOOPBACK:
            tokens = loopback_flow(settings, show_page, timeout_s=timeout_s, env=app.env)
        else:
            tokens = device_flow(settings, show, env=app.env)
    except (DeviceFlowFailed, LoopbackFlowFailed) as exc:
        raise OperationFailed(f"mailbox {address}: {exc}") from None
    except KeyboardInterrupt:
        raise Interrupted("no token saved") from None
    token_file = save_grant(settings.refresh_token_file, tokens.refresh_token, tokens.access_token,
                            tokens.expires_in_s, started)
    try:
        click.echo(f"wrote the refresh token to {token_file} (mode 0600)")
        if check is not None:
            check(tokens.access_token)
    except KeyboardInterrupt:
        raise Interrupted(f"the refresh token is saved in {token_file}; the {service} check did not run "
                          f"(sendhost mailbox check {address} runs it)") from None


@group.command("check", epilog="Exit 0 every step ok; 1 a step failed; 2 bad input or configuration.")
@click.argument("address")
@format_option()
@click.pass_obj
def check(app: App, address: str, fmt: str | None) -> None:
    """Open ADDRESS's SMTP session (connect, TLS, AUTH; no message) and, with an imap block, its IMAP session
    (login, the folder selected read-only); one line a step: ok, or the failure with the server's reply."""
    from sender.mailbox_check import Step, all_ok, check_imap, check_smtp
    from sender.oauth import TokenKeeper

    mailbox = _mailbox(app, address, require_refresh_tokens=True)
    if mailbox.smtp is None:
        raise ConfigError(f"mailbox {address} has no smtp block; add smtp: {{host: ..., username: ...}}")
    tokens = TokenKeeper(env=app.env)
    steps: list[Step] = check_smtp(mailbox.smtp, tokens)
    if mailbox.imap is not None:
        steps += check_imap(mailbox.imap, tokens)
    if app.output_format(fmt) == "json":
        emit_json({"mailbox": mailbox.address, "ok": all_ok(steps), "steps": [s.as_json() for s in steps]})
    else:
        for step in steps:
            click.echo(printable(str(step)))
    if not all_ok(steps):
        app.fail(f"mailbox {mailbox.address}: {next(s for s in steps if s.state.value == 'failed')}", 1)


def _has_display(env: Mapping[str, str]) -> bool:
    """Whether a browser could open here: over SSH or on a server there is none, and webbrowser would start a
    text browser in the terminal instead, over the prompt."""
    return sys.platform == "darwin" or bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def _seed(app: App, address: str) -> Seed | None:
    """ADDRESS's placement seed in the inventory, or None when it is none (or there is no inventory)."""
    from toolkit.config import resolve_inventory_path
    from toolkit.inventory import load_inventory

    setting = resolve_inventory_path(app.inventory_flag, app.env)
    if not setting.value:
        return None
    inventory = load_inventory(Path(setting.value), require_refresh_tokens=False)
    return next((s for s in inventory.seeds if s.address == address.strip().lower()), None)


def _mailbox(app: App, address: str, *, require_refresh_tokens: bool) -> Mailbox:
    """ADDRESS's mailbox in the inventory; ConfigError when there is no inventory or no such mailbox."""
    from toolkit.config import resolve_inventory_path
    from toolkit.inventory import load_inventory

    setting = resolve_inventory_path(app.inventory_flag, app.env)
    if not setting.value:
        raise ConfigError("no inventory: pass --inventory PATH or set SENDHOST_INVENTORY")
    inventory = load_inventory(Path(setting.value), require_refresh_tokens=require_refresh_tokens)
    mailbox = next((m for m in inventory.mailboxes if m.address.lower() == address.lower()), None)
    if mailbox is None:
        raise ConfigError(f"no mailbox {address} in {setting.value}; add it to sendhost_mailboxes")
    return mailbox
