"""What a claimed row says: its Subject (with the reply headers of its lead's thread) and its body.

A campaign's row carries its step's templates and its lead's merge fields (sender.campaigns.template renders them,
`{unsubscribe_url}` being the row's one-click link); an enqueued row carries its own text. A step without a
subject of its own replies in the thread of the lead's earlier steps (sender.sending.thread_headers).
"""

from __future__ import annotations

from dataclasses import dataclass

from sender.campaigns.template import render
from sender.ledger.store import Claimed
from sender.safe_text import header_problem
from sender.sending.thread_headers import EarlierStep, ThreadHeaders, step_headers

UNSUBSCRIBE_FIELD = "unsubscribe_url"


@dataclass(frozen=True)
class Content:
    headers: ThreadHeaders
    body: str


def compose(row: Claimed, unsubscribe: str) -> Content:
    """The row's headers and body; TemplateError when its lead cannot fill a field, ValueError when a reply has no
    earlier step to reply to or its subject cannot be a header."""
    if row.fields is None:
        subject: str | None = row.subject if row.own_subject else None
        body = row.body
    else:
        values = {**row.fields, UNSUBSCRIBE_FIELD: unsubscribe}
        subject = render(row.subject, values) if row.own_subject else None
        body = render(row.body, values)
    # A lead stored before its values were checked for encoded words, or an enqueued row: refused before a mailbox
    # is reserved, rather than by the message's policy once the attempt started.
    if subject is not None and (problem := header_problem(subject)):
        raise ValueError(f"the subject {problem}")
    earlier = [EarlierStep(own, message_id) for own, message_id in row.earlier]
    return Content(step_headers(subject, earlier), body)
