"""Following a click token: the row's own link, and the click recorded with its verdict (docs/tracking.md). The
web service's `/c/<token>` does this for each request; `sendhost simulate` does it for its recipients' clicks."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from sender.campaigns.template import TemplateError
from sender.feedback.engagement import BURST_S, Hit, Verdict, classify_click
from sender.ledger.events import Feedback
from sender.sending.links import body_with_mark, links_of


@dataclass(frozen=True)
class Followed:
    """A click that named a row's own link: where it goes, and the verdict it was recorded with."""

    target: str
    row: int
    link: int  # from 0
    verdict: Verdict
    rule: str  # the rule that gave the verdict; '' for a person


def follow(feedback: Feedback, named: tuple[uuid.UUID, int] | None, method: str, user_agent: str) -> Followed | None:
    """Record a click on link `named` = (the row's idempotency key, the link's index), a token verified by the
    caller; None (and nothing recorded) when no sent campaign row has that link."""
    if named is None:
        return None
    key, index = named
    row = feedback.tracked_row(key)
    if row is None:
        return None
    try:
        links = links_of(body_with_mark(row.body, row.fields))
    except TemplateError:  # a lead's fields changed since the send so that its body no longer renders
        return None
    if index >= len(links):
        return None
    since = row.now - timedelta(seconds=BURST_S)
    verdict, rule = classify_click(Hit(method, user_agent, (row.now - row.accepted_at).total_seconds(), len(links),
                                       index, feedback.links_clicked_since(row.id, since)))
    feedback.record_engagement(row.id, "click", index, verdict.value, rule,
                               since if rule == "every_link_same_second" else None)
    return Followed(links[index], row.id, index, verdict, rule)
