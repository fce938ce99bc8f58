"""`sendhost postmaster`: each sending domain's daily spam rate and reputation from Google Postmaster Tools, kept in
the ledger and told to the warm-up gates (sender.postmaster; docs/postmaster.md)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from sendhost.errors import ConfigError, Interrupted, OperationFailed
from toolkit.cli.sender.context import SenderContext, ledger_group, pass_sender
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sendhost.model import PostmasterSettings

group = ledger_group("postmaster", "The provider's spam rate: Google Postmaster Tools into the ledger and the "
                                  "warm-up gates.")
group.epilog = (f"{group.epilog} " if group.epilog else "") + (
    "postmaster sync: exit 0 ok; 1 Postmaster Tools or a service could not be read, or a domain could not be "
    "(each named); 2 bad input or configuration, or Google refused the credentials or a domain (401/403: the "
    "message names the domain and the fix).")


def _settings(sc: SenderContext) -> PostmasterSettings:
    inventory = sc.app.require_inventory()
    if inventory.postmaster is None:
        raise ConfigError(f"{inventory.path}: no sendhost_postmaster; add it with oauth: {{provider: google, "
                          "client_id: ..., refresh_token_file: ...}} or service_account_key_file: PATH "
                          "(docs/postmaster.md)")
    return inventory.postmaster


@group.command("sync")
@click.option("--domain", "only", multiple=True, metavar="DOMAIN",
              help="Read only this domain (repeatable; default: sendhost_postmaster.domains, else sendhost_domains, "
                   "else the mailboxes' domains).")
@click.option("--days", type=click.IntRange(1, 120), default=None,
              help="Days read back, up to yesterday (default: sendhost_postmaster.days, 14).")
@format_option()
@pass_sender
def sync_command(sc: SenderContext, only: tuple[str, ...], days: int | None, fmt: str | None) -> None:
    """Read each sending domain's daily user-reported spam ratio and domain reputation from Postmaster Tools, keep
    them per domain and day in the ledger, and tell the warm-up gates of each new figure: at or above 0.1% the
    ramp holds, at or above 0.3% the domain's mailboxes pause. A day Google has no ratio for is no data, never 0,
    and changes nothing."""
    from sender.postmaster.api import PostmasterApi
    from sender.postmaster.credentials import credentials_for
    from sender.postmaster.sync import sending_domains, sync
    from toolkit.cli.warmup import _synced_guard
    from toolkit.inventory_schema import DOMAIN_RE

    settings = _settings(sc)
    inventory = sc.app.require_inventory()
    for name in only:
        if not DOMAIN_RE.match(name.lower().rstrip(".")):
            raise ConfigError(f"--domain {name!r} is not a domain name like example.com")
    domains = [d.lower().rstrip(".") for d in only] or sending_domains(
        settings.domains, [d.name for d in inventory.domains], [m.domain for m in inventory.mailboxes])
    if not domains:
        raise ConfigError(f"{inventory.path}: no domain to read; list sendhost_domains or "
                          "sendhost_postmaster.domains, or give --domain")
    api = PostmasterApi(settings.api_url, credentials_for(settings, env=sc.app.env))
    guard = _synced_guard(sc.app)
    with sc.ledger() as ledger:
        result = sync(api, ledger, guard, domains, datetime.now(UTC).date(), days or settings.days)
    if sc.app.output_format(fmt) == "json":
        emit_json({"domains": [d.to_json() for d in result.domains]})
    else:
        rows = []
        lines = []
        for domain in result.domains:
            with_ratio = [d for d in domain.days if d.spam_ratio is not None]
            last = with_ratio[-1] if with_ratio else None
            shown = last or (domain.days[-1] if domain.days else None)  # whose reputation is shown
            rows.append((domain.domain, last.day if last else "no data", _rate(last.spam_ratio) if last else "-",
                         (shown.reputation if shown else None) or "-",
                         f"{len(with_ratio)} of {len(domain.missing) + len(with_ratio)}" if domain.first else "-"))
            lines += [told.words(domain.domain) for told in domain.told if told.verdict != "ok"]
            if domain.problem:
                named = domain.problem.startswith(domain.domain)
                lines.append(domain.problem if named else f"{domain.domain}: {domain.problem}")
        emit_table("Postmaster Tools", ["domain", "last day", "spam rate", "reputation", "days with data"], rows,
                   summary="\n".join(lines) or None)
    if result.problems:
        names = ", ".join(d.domain for d in result.problems)
        if only and all(d.problem and "is not in Postmaster Tools" in d.problem for d in result.problems):
            raise ConfigError(result.problems[0].problem or names)
        raise OperationFailed(f"postmaster sync: {names} could not be read or told; see above")


def _rate(ratio: float | None) -> str:
    from warmup.health import format_rate

    return "no data" if ratio is None else format_rate(ratio)


@group.command("authorize")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Seconds the loopback flow waits for the browser's redirect.")
@pass_sender
def authorize_command(sc: SenderContext, timeout_s: float) -> None:
    """Get the refresh token of sendhost_postmaster's OAuth grant (the loopback redirect with PKCE, as `mailbox
    authorize` does for Google, with the read-only postmaster scope), signed in as a user of the domains in
    Postmaster Tools; write it to its refresh_token_file (0600)."""

    from sender.oauth.keeper import save_grant
    from sender.oauth.loopback import LoopbackFlowFailed
    from sender.oauth.loopback import authorize as loopback_flow

    settings = _settings(sc)
    if settings.oauth is None:
        raise ConfigError("sendhost_postmaster reads as a service account (service_account_key_file): there is "
                          "nothing to authorize")
    oauth = settings.oauth

    def show_page(url: str, redirect_uri: str) -> None:
        click.echo(f"To authorize Postmaster Tools ({oauth.scope}), open {url} in a browser on this machine, signed "
                   f"in as a user of the domains; waiting up to {timeout_s:.0f} s for its redirect to {redirect_uri}")

    started = time.time()
    try:
        tokens = loopback_flow(oauth, show_page, timeout_s=timeout_s, env=sc.app.env)
    except LoopbackFlowFailed as exc:
        raise OperationFailed(f"postmaster authorize: {exc}") from None
    except KeyboardInterrupt:
        raise Interrupted("no token saved") from None
    token_file = save_grant(oauth.refresh_token_file, tokens.refresh_token, tokens.access_token,
                            tokens.expires_in_s, started)
    click.echo(f"wrote the refresh token to {token_file} (mode 0600); `sendhost postmaster sync` reads with it")
