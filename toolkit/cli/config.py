"""`sendhost config`: the effective configuration and where each value came from."""

from __future__ import annotations

import click

from sendhost.errors import SendhostError
from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.config import Setting
from toolkit.output import emit_json, emit_table, format_option


@click.group("config", cls=WholeHelpGroup)
def group() -> None:
    """Inspect the effective configuration."""


@group.command("show")
@format_option()
@click.pass_obj
def show(app: App, fmt: str | None) -> None:
    """Each setting, its value (secrets masked) and its source: flag, env, inventory or default. With no Redis or
    database URL configured, the value names the embedded server's socket or data directory (starts nothing)."""
    settings = app.config.settings()
    embedded = {s.name: where for s in settings if (where := _embedded_where(app, s)) is not None}
    if app.output_format(fmt) == "json":
        emit_json({s.name: {"value": s.shown if s.value is not None else None, "source": s.source,
                            **({"embedded": embedded[s.name]} if s.name in embedded else {})} for s in settings})
        return
    emit_table("sendhost configuration", ["setting", "value", "source"],
               [(s.name, f"embedded ({embedded[s.name]})" if s.name in embedded else s.shown, s.source)
                for s in settings])


def _embedded_where(app: App, setting: Setting) -> str | None:
    """Where the embedded server that stands in for an unset `redis_url` or `database_url` lives; None for any other
    setting, or one that is set."""
    if setting.value is not None:
        return None
    try:
        if setting.name == "database_url":
            from sender.embedded_status import embedded_data_dir

            return embedded_data_dir(app.state_dir)
        if setting.name == "redis_url":
            from sendhost.embedded import socket_path

            return str(socket_path(app.state_dir))
    except SendhostError as exc:  # a state directory `embedded status` would refuse: say so, show the rest
        return f"unreadable: {exc}"
    return None
