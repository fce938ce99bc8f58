"""The `sendhost` Click group. Command groups load lazily so `sendhost --help` stays fast."""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

import click

from sendhost.errors import Interrupted, SendhostError
from toolkit import __version__
from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.logging_setup import configure_logging

# group name -> "module:attribute". A group is listed here only once it works.
GROUPS: dict[str, str] = {
    "campaign": "toolkit.cli.campaign:group",
    "config": "toolkit.cli.config:group",
    "dns": "toolkit.cli.dns:group",
    "embedded": "toolkit.cli.embedded:group",
    "host": "toolkit.cli.host:group",
    "iam": "toolkit.cli.iam:group",
    "inventory": "toolkit.cli.inventory:group",
    "lead": "toolkit.cli.lead:group",
    "mailbox": "toolkit.cli.mailbox:group",
    "placement": "toolkit.cli.placement:group",
    "pool": "toolkit.cli.pool:group",
    "postmaster": "toolkit.cli.postmaster:group",
    "provision": "toolkit.cli.provision:command",
    "sandbox": "toolkit.cli.sandbox:group",
    "sender": "toolkit.cli.sender:group",
    "simulate": "toolkit.cli.simulate:command",
    "warmup": "toolkit.cli.warmup:group",
}

EXIT_CODES_HELP = """\b
Exit codes:
  0  ok
  1  failed, or findings at or above --fail-on
  2  usage or configuration error (the message names what to fix)
  130  interrupted (Ctrl-C)"""


class LazyGroup(WholeHelpGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(GROUPS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = GROUPS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        # Ctrl-C in any command reaches main() as Interrupted: click would turn a KeyboardInterrupt into Abort
        # after printing a blank line, and main() reports it in one.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted("") from None


@click.group(cls=LazyGroup, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--inventory", "-i", "inventory", metavar="PATH",
              help="Inventory file (env SENDHOST_INVENTORY; default ./inventory.yml).")
@click.option("--redis-url", metavar="URL",
              help="Redis URL (env SENDHOST_REDIS_URL or REDIS_URL; default: embedded Redis).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]),
              help="Default output format for reading commands.")
@click.option("-v", "--verbose", count=True, help="More logging on stderr; -v also shows tracebacks.")
@click.version_option(__version__, prog_name="sendhost")
@click.pass_context
def cli(ctx: click.Context, inventory: str | None, redis_url: str | None, fmt: str | None, verbose: int) -> None:
    """Deploy and run cold-email sending hosts on AWS.

    Elastic IP pools that rotate and park addresses, a warm-up send guard, DNS audits for CI, and Ansible
    provisioning, all configured from one Ansible inventory.
    """
    configure_logging(verbose)  # sendhost's own loggers only: botocore at DEBUG prints the AWS session token
    ctx.obj = App(inventory_flag=inventory, format_flag=fmt, verbose=verbose, redis_url_flag=redis_url)


def main(argv: list[str] | None = None) -> Any:
    """Entry point: every exit goes through here, so no traceback reaches a user unless asked for with -v."""
    args = sys.argv[1:] if argv is None else argv
    verbose = any(a in ("-v", "--verbose") or (a.startswith("-v") and set(a[1:]) == {"v"}) for a in args)
    try:
        cli.main(args=args, prog_name="sendhost", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        if sys.stderr.isatty():  # past the ^C the terminal echoed, so the line starts at the margin
            click.echo("", err=True)
        click.echo(f"interrupted: {exc}" if str(exc) else "interrupted", err=True)
        sys.exit(130)
    except click.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort: it is still Ctrl-C
            click.echo("interrupted", err=True)
            sys.exit(130)
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code == 2 else exc.exit_code)
    except SendhostError as exc:
        if verbose:
            traceback.print_exc()
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        click.echo(f"internal error: {type(exc).__name__}: {exc} (run with -v for the traceback)", err=True)
        sys.exit(1)
    sys.exit(0)
