"""The sender agent on a clock of the test's. Kept light: the agent processes of the crash tests import it."""

from __future__ import annotations

from collections.abc import Callable

from sender import Ledger
from sender.assembly import build_agent as assemble
from sender.sending.agent import Agent
from sender.settings import AgentSettings
from toolkit.cli.sender.context import SenderContext

HOST = "sender-1"  # the one host of the test inventories (tests.sender.world)


def clocked_agent(context: SenderContext, clock: Callable[[], float], checkpoint: Callable[[str], None] | None = None,
                  smtp_timeout_s: float = 5.0) -> tuple[Agent, Callable[[], Ledger]]:
    """What `sendhost sender run` builds for HOST (toolkit.cli.sender.run.build_agent), on `clock`: the CLI has no
    clock to give, the composition root (sender.assembly) takes one."""
    inventory = context.app.require_inventory()
    host = inventory.host(HOST)
    settings = AgentSettings(host=host.name, primary_ip=host.primary_ip,
                             mailboxes=tuple(m for m in inventory.mailboxes if m.smtp is not None),
                             unsubscribe_base_url=inventory.unsubscribe_base_url or "", smtp_timeout_s=smtp_timeout_s)
    return assemble(settings, context.place, redis_url=context.app.config.redis_url.value,
                    state_dir=context.app.state_dir, unsubscribe_key_file=inventory.unsubscribe_key_file,
                    env=context.app.env, checkpoint=checkpoint, clock=clock)
