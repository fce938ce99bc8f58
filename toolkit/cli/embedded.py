"""`sendhost embedded`: the embedded Redis and PostgreSQL that hold state when none is configured."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sendhost.errors import SendhostError
from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from sender.embedded_status import PostgresStatus

EXIT_HELP = "Exit 0 ok; 1 a server did not stop; 2 bad state directory (the message names it)."
SERVERS = ("redis", "postgres")  # `embedded stop SERVER`


@click.group("embedded", cls=WholeHelpGroup, epilog=EXIT_HELP)
def group() -> None:
    """The embedded Redis and PostgreSQL under the state directory (.sendhost/, or SENDHOST_STATE_DIR).

    Redis persists to an append-only file there (fsynced every second); PostgreSQL keeps the send ledger (run as
    root, in a directory of its own system user, embedded_postgres). Both admit only you, outlive each command, and
    start again with the next command that needs them; production uses servers of its own (--redis-url,
    REDIS_URL or sendhost_redis_url; --database-url, SENDHOST_DATABASE_URL or sendhost_database_url).
    """


@group.command("status")
@format_option()
@click.pass_obj
def status(app: App, fmt: str | None) -> None:
    """Whether each embedded server runs, its pid and version, where its state lives, how to reach it and, run as
    root, the system user PostgreSQL runs as (starts nothing)."""
    from sender.embedded_status import embedded_postgres_status
    from sendhost.embedded import embedded_status

    shown = embedded_status(app.state_dir)
    postgres = embedded_postgres_status(app.state_dir)
    if app.output_format(fmt) == "json":
        emit_json({**shown.to_json(), "postgres": postgres.to_json()})
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
    emit_table("embedded PostgreSQL", ["setting", "value"], postgres_rows(postgres))


def postgres_rows(postgres: PostgresStatus) -> list[tuple[str, object]]:
    """The embedded PostgreSQL's table rows: where its data is, whether it runs, its URL and who runs it."""
    from sender.embedded_place import ROOT_HOME

    if postgres.running:
        admits = ("only its owner, by peer authentication on its socket; no TCP" if not postgres.exposures else
                  "MORE than its owner (" + "; ".join(postgres.exposures) + "): the next command that needs it "
                  "restarts it private")
    else:
        admits = "-"
    if postgres.data_dir is None:
        data = f"none yet (the first ledger command creates it under {ROOT_HOME})"
    elif not postgres.created:
        data = f"{postgres.data_dir} (none yet: the first ledger command creates it)"
    else:
        data = str(postgres.data_dir)
    runs_as = postgres.server_user or "-"
    if postgres.system_user:  # PostgreSQL refuses to run as root: sendhost made this account for it
        runs_as += " (a system user sendhost creates: PostgreSQL refuses to run as root)"
    return [
        ("data directory", data),
        ("running", f"yes, pid {postgres.pid}" if postgres.running else
         "no (the next command that needs it starts it)"),
        ("postgresql version", postgres.version or "-"),
        ("runs as", runs_as),
        ("socket directory", postgres.socket_dir or "-"),
        ("url", postgres.url or "-"),
        ("admits", admits),
    ]


@group.command("stop")
@click.argument("server", required=False, type=click.Choice(SERVERS))
@click.pass_obj
def stop(app: App, server: str | None) -> None:
    """Stop the embedded Redis (flushing its append-only file) and PostgreSQL, or only SERVER; the next command that
    needs either starts it again."""
    from sender.embedded import stop_embedded_postgres
    from sendhost.embedded import stop_embedded

    failed: list[SendhostError] = []
    if server in (None, "redis"):
        try:
            pid = stop_embedded(app.state_dir)
        except SendhostError as exc:
            failed.append(exc)
        else:
            click.echo(f"no embedded Redis running under {app.state_dir}" if pid is None else
                       f"stopped the embedded Redis under {app.state_dir} (pid {pid}); its state stays in "
                       f"{app.state_dir}")
    if server in (None, "postgres"):
        try:  # even when Redis would not stop: one server's trouble is no reason to leave the other running
            pid = stop_embedded_postgres(app.state_dir)
        except SendhostError as exc:
            failed.append(exc)
        else:
            click.echo(f"no embedded PostgreSQL running under {app.state_dir}" if pid is None else
                       f"stopped the embedded PostgreSQL of {app.state_dir} (pid {pid}); its data stays where "
                       "`sendhost embedded status` says")
    if failed:
        app.fail("; ".join(str(exc) for exc in failed), max(exc.exit_code for exc in failed))
