"""`sendhost config`: the effective configuration and where each value came from."""

from __future__ import annotations

import click

from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option


@click.group("config")
def group() -> None:
    """Inspect the effective configuration."""


@group.command("show")
@format_option()
@click.pass_obj
def show(app: App, fmt: str | None) -> None:
    """Each setting, its value (secrets masked) and its source: flag, env, inventory or default."""
    settings = app.config.settings()
    if app.output_format(fmt) == "json":
        emit_json({s.name: {"value": s.shown if s.value is not None else None, "source": s.source} for s in settings})
        return
    emit_table("sendhost configuration", ["setting", "value", "source"],
               [(s.name, s.shown, s.source) for s in settings])
