"""`sendhost campaign`: campaign files in the ledger (apply, add-leads), their runs (start, pause, resume, stop,
reassign) and what became of them (status). One module per part; this one holds the group. The ledger is the
`sender` group's (the same --database-url and SENDHOST_DATABASE_URL)."""

from __future__ import annotations

from toolkit.cli.campaign import files, forecast, moves, report
from toolkit.cli.sender.context import ledger_group

group = ledger_group("campaign", "Campaigns: sequences of steps declared in a file, sent to the leads added to them "
                                 "(docs/campaigns.md).")

for _command in (files.apply_command, files.add_leads_command, *moves.MOVE_COMMANDS, moves.reassign_command,
                 report.status_command, forecast.forecast_command):
    group.add_command(_command)
