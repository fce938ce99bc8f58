"""`sendhost sandbox up|status|deliver|down`: a rehearsal world (AWS as moto, Redis, PostgreSQL, a submission
server, an IMAP server) that stays up between commands."""

from __future__ import annotations

from pathlib import Path

import click

from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.output import emit_json, emit_table, format_option

EXIT_HELP = ("Exit 0 ok; 2 the sandbox extra is missing or a part failed to start, or deliver's file cannot be read or "
             "names no sandbox mailbox (the message names it); 130 Ctrl-C.")


@click.group("sandbox", cls=WholeHelpGroup, epilog=EXIT_HELP,
             short_help="A local rehearsal world (AWS in moto, Redis, PostgreSQL, SMTP, IMAP) that stays up.")
def group() -> None:
    """A rehearsal world under <state dir>/sandbox/: moto's AWS server, the embedded Redis and PostgreSQL, a
    submission server with AUTH that records each message's peer, and where dovecot-imapd is installed an IMAP
    server holding each sandbox mailbox's INBOX and Sent (`sandbox deliver FILE` drops a reply or bounce there).

    `eval "$(sendhost sandbox up)"` points this shell at it (AWS_ENDPOINT_URL, fake AWS keys, SENDHOST_REDIS_URL,
    SENDHOST_DATABASE_URL, SENDHOST_INVENTORY); then `pool create`, `pool status`, `sender migrate` ... run against
    it unchanged. `sandbox down` stops everything and removes what `up` made. Needs pip install 'sendhost[sandbox]'.
    """


def sandbox_state_dir(app: App) -> Path:
    """The state directory without reading the inventory: the shell `up` set up names the sandbox's inventory in
    SENDHOST_INVENTORY, which `down` removes, and `up`, `status` and `down` must keep working from that shell."""
    from toolkit.config import resolve_config

    flags = {"inventory": app.inventory_flag, "redis_url": app.redis_url_flag}
    return Path(resolve_config(flags, app.env, None).state_dir.value or ".sendhost")


@group.command("up")
@click.pass_obj
def up(app: App) -> None:
    """Start every part (says so when it already runs) and print the environment to export, on stdout."""
    from rehearsal import world

    state_dir = sandbox_state_dir(app)
    root = world.sandbox_dir(state_dir)
    states = {part.name: part.state for part in world.status(state_dir)}
    already = all(state is world.PartState.UP for state in states.values())
    afresh = states["aws"] is world.PartState.DOWN and world.PartState.UP in states.values()
    env = world.up(state_dir)
    how = "already up" if already else "up afresh (its AWS stand-in had stopped, and its world with it)" if afresh \
        else "up"
    click.echo(f"sandbox {how} in {root}; inventory {env['SENDHOST_INVENTORY']}; `sendhost sandbox down` stops it",
               err=True)
    [imap] = [part for part in world.status(state_dir) if part.name == "imap"]
    click.echo(f"imap: {imap.address}" + (" (IMAPS; the inventory's mailboxes read their inboxes there)"
                                          if imap.state is world.PartState.UP else ""), err=True)
    for key, value in env.items():
        click.echo(f"export {key}={world.shell_quote(value)}")


@group.command("status")
@format_option()
@click.pass_obj
def status(app: App, fmt: str | None) -> None:
    """Each part: up or down, its pid and address (starts nothing)."""
    from rehearsal import world

    state_dir = sandbox_state_dir(app)
    parts = world.status(state_dir)
    if app.output_format(fmt) == "json":
        emit_json([{"part": p.name, "state": p.state.value, "pid": p.pid, "address": p.address} for p in parts])
        return
    emit_table(f"sandbox ({world.sandbox_dir(state_dir)})", ["part", "state", "pid", "address"],
               [(p.name, p.state.value, p.pid or "-", p.address) for p in parts])


@group.command("deliver")
@click.argument("message_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def deliver(app: App, message_file: Path) -> None:
    """Put a message file (a reply, a bounce, an auto-reply: RFC 5322, as received) in the INBOX of each sandbox
    mailbox its Delivered-To, To or Cc names, for `sendhost sender inbox --once` to read. Exit 2 when the file
    cannot be read, names no sandbox mailbox, or the sandbox has no IMAP server running."""
    from rehearsal import world

    try:
        raw = message_file.read_bytes()
    except OSError as exc:
        app.fail(f"{message_file}: cannot read it ({exc.strerror or exc})", 2)
    delivered = world.deliver(sandbox_state_dir(app), raw, str(message_file))
    click.echo(f"delivered {message_file} to the INBOX of {', '.join(delivered)}")


@group.command("down")
@click.pass_obj
def down(app: App) -> None:
    """Stop every part and remove the sandbox directory (nothing to do when it is not up)."""
    from rehearsal import world

    state_dir = sandbox_state_dir(app)
    stopped = world.down(state_dir)
    click.echo(f"sandbox down: stopped {', '.join(stopped)}" if stopped else "sandbox down: nothing was running")
