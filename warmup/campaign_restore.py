"""A campaign's counters raised to what the sender's ledger shows, after Redis lost them: the campaign's day count
and each mailbox's share of it, on the campaign's local day (`restore_campaign.lua`). Never lowers them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from warmup import keys
from warmup.days import counts_on, local_day
from warmup.mailboxes import validate_address
from warmup.scripts import GuardScripts


def restore_campaign(scripts: GuardScripts, group: str, name: str, timezone: str,
                     sends: Iterable[tuple[str, datetime]], now_ms: int) -> int:
    """Raise campaign `name`'s counters (mailbox group `group`, days in `timezone`) to the (mailbox, when) sends
    of it that fall on its current day up to `now_ms`; the campaign's count of the day after."""
    today = local_day(now_ms, timezone)
    per_mailbox: Counter[str] = Counter(validate_address(mailbox) for mailbox, when in sends
                                        if counts_on(when, today, timezone, now_ms))
    pairs = [str(part) for address, count in sorted(per_mailbox.items()) for part in (address, count)]
    return int(scripts.restore_campaign(keys=[keys.GroupKeys(group).campaign(name)],
                                        args=[today.isoformat(), sum(per_mailbox.values()), *pairs]))
