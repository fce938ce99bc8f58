"""The message a row becomes: its fixed Message-ID, RFC 8058 one-click unsubscribe headers, a visible link."""

from __future__ import annotations

from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime

from sender.sending.thread_headers import ThreadHeaders

UNSUBSCRIBE_PLACEHOLDER = "{unsubscribe_url}"


def message_id_for(idempotency_key: object, mailbox: str) -> str:
    """The row's Message-ID: its idempotency key at the sending mailbox's domain (unique per row, fixed)."""
    return f"<{idempotency_key}@{mailbox.rsplit('@', 1)[1]}>"


def unsubscribe_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/u/{token}"


def build_message(*, mailbox: str, to: str, subject: str | ThreadHeaders, text: str, message_id: str,
                  unsubscribe: str, now: datetime | None = None) -> EmailMessage:
    """A plain-text message from `mailbox` to `to`, with List-Unsubscribe (https and mailto) and
    List-Unsubscribe-Post; the body gets the unsubscribe link where it has a placeholder, else at the end.
    `subject` as ThreadHeaders also sets the reply headers of a follow-up in its thread."""
    message = EmailMessage()
    message["From"] = mailbox
    message["To"] = to
    for name, value in (subject if isinstance(subject, ThreadHeaders) else ThreadHeaders(subject)).items():
        message[name] = value
    message["Date"] = format_datetime(now or datetime.now(UTC))
    message["Message-ID"] = message_id
    message["List-Unsubscribe"] = f"<{unsubscribe}>, <mailto:{mailbox}?subject=unsubscribe>"
    message["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    if UNSUBSCRIBE_PLACEHOLDER in text:
        body = text.replace(UNSUBSCRIBE_PLACEHOLDER, unsubscribe)
    elif unsubscribe in text:
        body = text
    else:
        body = f"{text.rstrip()}\n\n--\nUnsubscribe: {unsubscribe}\n"
    message.set_content(body)
    return message
