"""`sendhost sender`: the send ledger (migrate, roles, enqueue, suppress, status, show, sweep), the agent (run), its
feedback (web, inbox, health), a person's verdicts (unconfirmed, conflicts, resolve, retry, reclassify) and the
history's retirement (retire-history). One module per part; this one holds the group and the `sendhost-sender`
script."""

from __future__ import annotations

from toolkit.cli.sender import feedback, history, ledger, reclassify, run, verdicts
from toolkit.cli.sender.context import ledger_group

group = ledger_group("sender", "The sender agent and its PostgreSQL send ledger.")

for _command in (ledger.migrate_command, ledger.roles_command, ledger.enqueue_command, ledger.suppress_command,
                 ledger.status_command, ledger.show_command, ledger.sweep_command, run.run_command,
                 feedback.web_command, feedback.inbox_command, feedback.health_command,
                 verdicts.unconfirmed_command, verdicts.conflicts_command, verdicts.resolve_command,
                 verdicts.retry_command, reclassify.reclassify_command, history.retire_history_command):
    group.add_command(_command)


def agent_main() -> None:
    """The `sendhost-sender` console script: `sendhost sender run` with the same options."""
    import sys

    from toolkit.cli import main

    main(["sender", "run", *sys.argv[1:]])
