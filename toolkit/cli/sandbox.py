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
    SENDHOST_INVENTORY, which `down` removes, and `up`, `status` and `down` must keep working from that shell.
    SENDHOST_STATE_DIR, which `up` exports, finds the sandbox from any directory; without it, the current one's."""
    from toolkit.config import resolve_config

    flags = {"inventory": app.inventory_flag, "redis_url": app.redis_url_flag}
    return Path(resolve_config(flags, app.env, None).state_dir.value or ".sendhost")


def looked_in(app: App) -> str:
    """Where the sandbox commands look, and why there: `/p/.sendhost/sandbox (SENDHOST_STATE_DIR)`."""
    from rehearsal import world

    why = "SENDHOST_STATE_DIR" if app.env.get("SENDHOST_STATE_DIR") else \
        "the current directory's .sendhost: no SENDHOST_STATE_DIR"
    return f"{world.sandbox_dir(sandbox_state_dir(app))} ({why})"


def other_sandbox(app: App) -> str | None:
    """What to do when this shell's environment is another sandbox's than the one the commands look in (its
    SENDHOST_INVENTORY is `DIR/sandbox/inventory.yml` elsewhere), or None."""
    from rehearsal import world

    inventory = app.env.get("SENDHOST_INVENTORY")
    if not inventory or Path(inventory).name != "inventory.yml" or Path(inventory).parent.name != "sandbox":
        return None
    theirs = Path(inventory).parent.absolute()
    if theirs == world.sandbox_dir(sandbox_state_dir(app)):
        return None
    return (f"this shell's environment is the sandbox in {theirs} (SENDHOST_INVENTORY); to use that one, "
            f"`export SENDHOST_STATE_DIR={world.shell_quote(str(theirs.parent))}`")


@group.command("up")
@click.pass_obj
def up(app: App) -> None:
    """Start every part (says so when it already runs) and print the environment to export, on stdout; warns, on
    stderr, when this shell's environment is another sandbox's."""
    from rehearsal import world

    state_dir = sandbox_state_dir(app)
    where = looked_in(app)
    if (other := other_sandbox(app)) is not None:
        click.echo(f"warning: starting a second sandbox, in {where}: {other}", err=True)
    states = {part.name: part.state for part in world.status(state_dir)}
    already = all(state is world.PartState.UP for state in states.values())
    afresh = states["aws"] is world.PartState.DOWN and world.PartState.UP in states.values()
    env = world.up(state_dir)
    how = "already up" if already else "up afresh (its AWS stand-in had stopped, and its world with it)" if afresh \
        else "up"
    click.echo(f"sandbox {how} in {where}; inventory {env['SENDHOST_INVENTORY']}; `sendhost sandbox down` stops it",
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
    emit_table(f"sandbox in {looked_in(app)}", ["part", "state", "pid", "address"],
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
    from rehearsal.errors import SandboxConfigError

    try:
        delivered = world.deliver(sandbox_state_dir(app), raw, str(message_file))
    except SandboxConfigError as exc:
        other = other_sandbox(app)
        app.fail(f"{exc}; looked in {looked_in(app)}" + (f"; {other}" if other else ""), 2)
    click.echo(f"delivered {message_file} to the INBOX of {', '.join(delivered)}, in {looked_in(app)}")


@group.command("down")
@click.pass_obj
def down(app: App) -> None:
    """Stop every part and remove the sandbox directory (nothing to do when it is not up)."""
    from rehearsal import world

    state_dir = sandbox_state_dir(app)
    stopped = world.down(state_dir)
    click.echo(f"sandbox down: stopped {', '.join(stopped)} in {looked_in(app)}" if stopped
               else f"sandbox down: nothing was running in {looked_in(app)}")
