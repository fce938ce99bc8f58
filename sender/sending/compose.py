"""What a claimed row says: its Subject (with the reply headers of its lead's thread) and its body.

A campaign's row carries its step's templates and its lead's merge fields (sender.campaigns.template renders them,
`{unsubscribe_url}` being the row's one-click link); an enqueued row carries its own text. With its campaign's
click tracking on, each link of the body becomes `https://<domain>/c/<token>` here, at compose time (the ledger
keeps the text as written); with opens on, the message gets the URL of its open image (docs/tracking.md). A step
without a subject of its own replies in the thread of the lead's earlier steps (sender.sending.thread_headers).
"""

from __future__ import annotations

from dataclasses import dataclass

from sender.campaigns.spec import NO_TRACKING, Tracking
from sender.campaigns.template import render
from sender.ledger.store import Claimed
from sender.safe_text import header_problem
from sender.sending.links import UNSUBSCRIBE_MARK, body_with_mark, click_url, open_url, rewrite
from sender.sending.thread_headers import EarlierStep, ThreadHeaders, step_headers
from sender.sending.tokens import make_link_token, make_open_token

UNSUBSCRIBE_FIELD = "unsubscribe_url"


@dataclass(frozen=True)
class Content:
    headers: ThreadHeaders
    body: str
    open_image: str | None = None  # the 1x1 image's URL, when its campaign counts opens


def compose(row: Claimed, unsubscribe: str, tracking: Tracking = NO_TRACKING, key: bytes = b"") -> Content:
    """The row's headers and body, its links tracked as `tracking` says with tokens made with `key`; TemplateError
    when its lead cannot fill a field, ValueError when a reply has no earlier step to reply to or its subject
    cannot be a header."""
    open_image = None
    if row.fields is None:  # `enqueue`: no campaign file, never tracked
        subject: str | None = row.subject if row.own_subject else None
        body = row.body
    else:
        values = {**row.fields, UNSUBSCRIBE_FIELD: unsubscribe}
        subject = render(row.subject, values) if row.own_subject else None
        body = body_with_mark(row.body, row.fields)
        if tracking.clicks and tracking.domain:
            domain = tracking.domain
            body = rewrite(body, lambda index: click_url(domain, make_link_token(key, row.idempotency_key, index)))
        body = body.replace(UNSUBSCRIBE_MARK, unsubscribe)
        if tracking.opens and tracking.domain:
            open_image = open_url(tracking.domain, make_open_token(key, row.idempotency_key))
    # A lead stored before its values were checked for encoded words, or an enqueued row: refused before a mailbox
    # is reserved, rather than by the message's policy once the attempt started.
    if subject is not None and (problem := header_problem(subject)):
        raise ValueError(f"the subject {problem}")
    earlier = [EarlierStep(own, message_id) for own, message_id in row.earlier]
    return Content(step_headers(subject, earlier), body, open_image)
