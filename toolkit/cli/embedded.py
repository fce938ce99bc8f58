"""`sendhost embedded`: the embedded Redis that holds state when no Redis is configured."""

from __future__ import annotations

import click

from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option

EXIT_HELP = "Exit 0 ok; 1 the server did not stop; 2 bad state directory (the message names it)."


@click.group("embedded", epilog=EXIT_HELP)
def group() -> None:
    """The embedded Redis under the state directory (.sendhost/, or SENDHOST_STATE_DIR).

    It persists to an append-only file there (fsynced every second) and outlives each command; production
    uses a Redis of its own (--redis-url, REDIS_URL or the inventory's sendhost_redis_url).
    """


@group.command("status")
@format_option()
@click.pass_obj
def status(app: App, fmt: str | None) -> None:
    """Whether the embedded Redis runs, its pid, version and keys, and where its state lives (starts nothing)."""
    from sendhost.embedded import embedded_status

    shown = embedded_status(app.state_dir)
    if app.output_format(fmt) == "json":
        emit_json(shown.to_json())
        return
    aof = "none yet" if shown.aof_bytes is None else f"{shown.aof_bytes} bytes"
    emit_table("embedded Redis", ["setting", "value"], [
        ("state directory", shown.state_dir),
        ("running", f"yes, pid {shown.pid}" if shown.running else "no (the next command that needs it starts it)"),
        ("redis version", shown.version or "-"),
        ("keys", shown.keys if shown.keys is not None else "-"),
        ("append-only", "-" if shown.append_only is None else
         "yes, fsync every second" if shown.append_only == "yes" else
         f"{shown.append_only}: state is lost when it stops; `sendhost embedded stop` and the next command "
         "restarts it with persistence"),
        ("append-only file", f"{shown.aof_file} ({aof})"),
        ("socket", shown.socket),
    ])


@group.command("stop")
@click.pass_obj
def stop(app: App) -> None:
    """Stop the embedded Redis, flushing its append-only file; the next command that needs it starts it again."""
    from sendhost.embedded import stop_embedded

    pid = stop_embedded(app.state_dir)
    if pid is None:
        click.echo(f"no embedded Redis running under {app.state_dir}")
    else:
        click.echo(f"stopped the embedded Redis under {app.state_dir} (pid {pid}); its state stays in "
                   f"{app.state_dir}")
