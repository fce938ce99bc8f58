"""The message a row becomes: its fixed Message-ID, RFC 8058 one-click unsubscribe headers, a visible link."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import EmailPolicy
from email.utils import format_datetime

from sender.safe_text import header_problem
from sender.sending.thread_headers import ThreadHeaders

UNSUBSCRIBE_PLACEHOLDER = "{unsubscribe_url}"
# Headers a mailbox provider must read as written: the email package folds a too-long token of an unstructured
# header as RFC 2047 encoded words (`=?utf-8?q?=3Chttps=3A//...?=`), in which no reader finds an https URI.
LITERAL_HEADERS = frozenset({"list-unsubscribe", "list-unsubscribe-post"})


def _fold_list(name: str, value: str, linesep: str) -> str:
    """`name: value` with the value as written, folded only after the `, ` between its `<...>` items."""
    items = [item.strip() for item in value.split(",")]
    lines = [f"{name}: {items[0]}"]
    for item in items[1:]:
        if len(lines[-1]) + len(item) + 2 <= 78:
            lines[-1] += f", {item}"
        else:
            lines[-1] += ","
            lines.append(f" {item}")
    return linesep.join(lines) + linesep


class SendingPolicy(EmailPolicy):
    """policy.SMTP, except that List-Unsubscribe and List-Unsubscribe-Post are written literally, and that a value
    the email package would decode into other text (an encoded word) or a second line is refused, not parsed."""

    def header_store_parse(self, name: str, value: str) -> tuple[str, str]:
        if isinstance(value, str) and (problem := header_problem(value)):
            raise ValueError(f"the {name} header value {problem}")
        return super().header_store_parse(name, value)

    def fold(self, name: str, value: str) -> str:
        if name.lower() in LITERAL_HEADERS:
            return _fold_list(name, str(value), self.linesep)
        return super().fold(name, value)

    def fold_binary(self, name: str, value: str) -> bytes:
        if name.lower() in LITERAL_HEADERS:
            return _fold_list(name, str(value), self.linesep).encode("ascii")
        return super().fold_binary(name, value)


SENDING_POLICY = SendingPolicy(linesep="\r\n")  # policy.SMTP is policy.default with CRLF


def message_id_for(idempotency_key: object, mailbox: str) -> str:
    """The row's Message-ID: its idempotency key at the sending mailbox's domain (unique per row, fixed)."""
    return f"<{idempotency_key}@{mailbox.rsplit('@', 1)[1]}>"


def unsubscribe_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/u/{token}"


def build_message(*, mailbox: str, to: str, subject: str | ThreadHeaders, text: str, message_id: str,
                  unsubscribe: str, now: datetime | None = None, open_image: str | None = None) -> EmailMessage:
    """A plain-text message from `mailbox` to `to`, with List-Unsubscribe (https and mailto) and
    List-Unsubscribe-Post; the body gets the unsubscribe link where it has a placeholder, else at the end.
    `subject` as ThreadHeaders also sets the reply headers of a follow-up in its thread. With `open_image` (a
    campaign that counts opens) an HTML alternative of the same text carries a 1x1 image at that URL."""
    message = EmailMessage(policy=SENDING_POLICY)
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
    if open_image is not None:
        # The text as written, escaped, kept as the reader sees it in the plain part; the image last.
        message.add_alternative(
            "<!doctype html><html><body><div style=\"white-space:pre-wrap\">" + html.escape(body) + "</div>"
            f"<img src=\"{html.escape(open_image, quote=True)}\" width=\"1\" height=\"1\" alt=\"\">"
            "</body></html>\n", subtype="html")
    return message
