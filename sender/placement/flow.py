"""One placement test: from each chosen mailbox one message to each seed, each carrying a token of its own, queued
in the ledger for the agent's send path (pinned to the mailbox: its warm-up reservation counts as any send's);
then each seed read by IMAP until every message sent is found or its wait ends.

A message's wait starts when its submission server accepted it. One not found when its wait ended is `not_found`
("not found after 10 min"), never spam: nobody saw it there. One the agent had not handed over when the test's
wait ended (a warm-up gap, the day's cap, a pause) is `not_sent`; a seed that could not be searched leaves
`unknown` with why.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sender.campaigns.durations import format_duration
from sender.campaigns.template import fields, render
from sender.errors import SenderConfigError
from sender.ledger.store import Ledger
from sender.placement import store
from sender.placement.seeds import Looked, look
from sender.placement.verdicts import read_verdicts
from sender.sending.compose import UNSUBSCRIBE_FIELD
from sendhost.model import Mailbox, Seed

POLL_S = 15.0
NEUTRAL_SUBJECT = "A quick note"
# Row statuses that end without a handoff: the message never left.
NOT_SENT_STATUSES = {"failed", "suppressed", "cancelled", "unconfirmed"}
Looker = Callable[[Seed, Sequence[str]], Looked]


@dataclass(frozen=True)
class Content:
    """A message's subject and text; with `fields`, a campaign step's templates the agent renders with them."""

    subject: str
    body: str
    fields: dict[str, str] | None = None


def new_token() -> str:
    """One word of letters and digits (a provider's search splits at punctuation)."""
    return "sh" + secrets.token_hex(10)


def neutral(mailbox: Mailbox, seed: Seed, token: str) -> Content:
    return Content(NEUTRAL_SUBJECT, f"Hello,\n\nA short note from {mailbox.address}.\n\nBest regards\n\nref {token}\n")


def campaign_content(ledger: Ledger, campaign: str, step: int) -> Callable[[Mailbox, Seed, str], Content]:
    """The campaign's step as last applied, for a seed as a lead: `address` its address, any other field the step
    needs its address's local part (a field with a fallback takes the fallback); the agent renders it with the
    row's own unsubscribe link, as any lead's. A later step keeps the first's subject as `Re:`. TemplateError (bad
    input) when the step cannot be rendered."""
    row = ledger.fetch_one("placement_step", {"campaign": campaign, "step": step}, f"campaign {campaign} step {step}")
    if row is None:
        raise SenderConfigError(f"campaign {campaign!r} has no step {step} in the ledger; name an applied "
                                "campaign and one of its steps (`sendhost campaign status`)")
    subject, body, first_subject = row
    title = subject if subject else f"Re: {first_subject}"

    def content(mailbox: Mailbox, seed: Seed, token: str) -> Content:
        needed = (set(fields(body)[0]) | set(fields(title)[0])) - {UNSUBSCRIBE_FIELD}
        values = {name: seed.address.split("@", 1)[0] for name in needed} | {"address": seed.address}
        text = f"{body.rstrip()}\n\nref {token}\n"
        for template in (title, text):  # refused now, not by the agent at send time
            render(template, {**values, UNSUBSCRIBE_FIELD: "https://u.example/check"})
        return Content(title, text, values)

    return content


def start(ledger: Ledger, mailboxes: Sequence[Mailbox], seeds: Sequence[Seed], *, wait_s: float,
          content: Callable[[Mailbox, Seed, str], Content] = neutral, campaign: str | None = None,
          step: int | None = None, token: Callable[[], str] = new_token) -> int:
    """Record a test and queue its messages, one per (mailbox, seed); the test's id."""
    test = store.begin(ledger, wait_s=wait_s, campaign=campaign, step=step)
    for mailbox in mailboxes:
        for seed in seeds:
            made = token()
            body = content(mailbox, seed, made)
            store.enqueue(ledger, test, token=made, mailbox=mailbox.address, group=mailbox.group,
                          seed=seed.address, provider=seed.provider, subject=body.subject, body=body.body,
                          fields=body.fields)
    return test


def follow(ledger: Ledger, test: int, seeds: Sequence[Seed], domains: Mapping[str, str], *, wait_s: float,
           started: float, env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep, poll_s: float = POLL_S,
           looker: Looker | None = None) -> list[store.Result]:
    """Read the seeds until every message of `test` is placed or its wait ended; the results as kept.
    `domains` maps a mailbox to its From domain (what the receiver's DMARC verdict is about); `started` is when
    the test began (epoch seconds): a message still unsent `wait_s` after it is not_sent."""
    by_address = {seed.address.lower(): seed for seed in seeds}
    looking: Looker = looker or (lambda seed, tokens: look(seed, tokens, env=env))
    failures: dict[str, str] = {}  # token -> why its seed could not be searched last time
    while True:
        now = clock()
        pending = [s for s in store.sends(ledger, test) if s.placement == "pending"]
        if not pending:
            break
        lookable = []
        for send in pending:
            if send.accepted_at is not None:
                lookable.append(send)
            elif send.status in NOT_SENT_STATUSES:
                store.record(ledger, send.token, "not_sent",
                             detail=f"the agent ended the row {send.status}: {send.last_error or 'no reply kept'}")
            elif now >= started + wait_s:
                store.record(ledger, send.token, "not_sent",
                             detail=f"still {send.status} after {_duration(wait_s)} (is `sendhost sender run` "
                                    "running? a warm-up gap, the day's cap or a pause holds it)")
        for address in sorted({s.seed for s in lookable}):
            seed = by_address[address]
            mine = [s for s in lookable if s.seed == address]
            looked = looking(seed, [s.token for s in mine])
            for send in mine:
                found = looked.found.get(send.token)
                if found is not None:
                    accepted = send.accepted_at
                    assert accepted is not None
                    after = None if found.arrived_at is None else max(0.0, (found.arrived_at - accepted)
                                                                      .total_seconds())
                    verdicts = read_verdicts(found.message, seed.imap.authserv_id, domains.get(send.mailbox, ""))
                    store.record(ledger, send.token, found.placement, folder=found.folder, category=found.category,
                                 found_after_s=after, verdicts=verdicts)
                    failures.pop(send.token, None)
                    continue
                if looked.failed:
                    failures[send.token] = looked.failed
                else:
                    failures.pop(send.token, None)
                if send.accepted_at is not None and now >= send.accepted_at.timestamp() + wait_s:
                    if send.token in failures:
                        store.record(ledger, send.token, "unknown",
                                     detail=f"could not search {address}: {failures[send.token]}")
                    else:
                        store.record(ledger, send.token, "not_found",
                                     detail=f"not found after {_duration(wait_s)}")
        if all(s.placement != "pending" for s in store.sends(ledger, test)):
            break
        sleep(poll_s)
    store.finish(ledger, test)
    return store.results(ledger, test)


def _duration(seconds: float) -> str:
    """`10 min`, as the issue words it; else the campaign files' form (`90s`, `1h30m`)."""
    if seconds >= 60 and seconds % 60 == 0 and seconds < 3600:
        return f"{int(seconds // 60)} min"
    return format_duration(int(seconds))
