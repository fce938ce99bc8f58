"""The recipients: some addresses do not exist (their first step bounces), some people reply, some unsubscribe.

Each reaction reaches the ledger the way it does in production. A bounce report and a reply land in the sending
mailbox's inbox as raw messages, classified by the inbox reader's own parser (`sender.feedback.bounces.parse`) and
matched to the row they are about by the Message-IDs they carry, as `sender inbox` does; an unsubscribe is a click
on the message's one-click link, its token checked with the ledger's key (`verify_token`, as the feedback web
service checks it) and its row unsubscribed as `POST /u/<token>` does. Only the transports (IMAP, HTTP) are left
out. The ledger then ends the lead's sequence: its later steps are never created, or are cancelled.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from enum import StrEnum

from sender.feedback.bounces import MessageKind, parse
from sender.feedback.inbox import EVENT_OF
from sender.ledger.events import Event, Feedback
from sender.sending.tokens import verify_token
from simulation import events
from simulation.mail import Delivery
from simulation.model import Reactions

REPORTING_MTA = "mx.leads.example"


class Kind(StrEnum):
    BOUNCE = "bounce"
    REPLY = "reply"
    UNSUBSCRIBE = "unsubscribe"


@dataclass(frozen=True)
class Reaction:
    """What one recipient does about one message, and when."""

    at: float
    kind: Kind
    delivery: Delivery


class Recipients:
    """The people behind the leads' addresses, drawing their reactions from one seeded generator."""

    def __init__(self, rng: random.Random, reactions: Reactions) -> None:
        self.rng = rng
        self.reactions = reactions
        self._received: Counter[str] = Counter()

    def receive(self, delivery: Delivery, now: float) -> Reaction | None:
        """A message reached `delivery.rcpt`: the reaction it will cause, if any."""
        self._received[delivery.rcpt] += 1
        nth = self._received[delivery.rcpt]  # the step, as the recipient counts the messages it got
        rates = self.reactions
        if nth == 1 and self.rng.random() < rates.bounce:
            return Reaction(now + self.rng.uniform(*rates.bounce_after_s), Kind.BOUNCE, delivery)
        draw = self.rng.random()
        reply = rates.at_step(rates.reply, nth)
        if draw < reply:
            return Reaction(now + self.rng.expovariate(1 / rates.reply_mean_s), Kind.REPLY, delivery)
        if draw < reply + rates.at_step(rates.unsubscribe, nth):
            return Reaction(now + self.rng.expovariate(1 / rates.unsubscribe_mean_s), Kind.UNSUBSCRIBE, delivery)
        return None


class FeedbackPaths:
    """The ledger's feedback entry points as the inbox reader and the web service use them."""

    def __init__(self, feedback: Feedback, unsubscribe_key: bytes) -> None:
        self.feedback = feedback
        self.unsubscribe_key = unsubscribe_key
        self._replies = 0

    def take(self, reaction: Reaction, now: float) -> events.Reacted:
        """Bring `reaction` to the ledger."""
        if reaction.kind is Kind.UNSUBSCRIBE:
            return self._one_click(reaction, now)
        delivery = reaction.delivery
        if reaction.kind is Kind.BOUNCE:
            raw = bounce_report(delivery, now)
        else:
            self._replies += 1
            raw = reply_message(delivery, now, self._replies)
        parsed = parse(raw)
        row = next((found for found in (self.feedback.row_of(mid) for mid in parsed.about) if found is not None),
                   None)
        if row is None or parsed.kind is MessageKind.MALFORMED or (
                parsed.recipients and self.feedback.recipient_of(row) not in parsed.recipients):
            return _taken(reaction, now, row, None, "unmatched")  # nothing changes on a guess, as in the reader
        event = EVENT_OF[parsed.kind]
        applied = self.feedback.apply(row, event, source="inbox", ref=parsed.own_message_id or f"sim:{now}",
                                      detail=parsed.detail)
        return _taken(reaction, now, row, event, applied.value)

    def _one_click(self, reaction: Reaction, now: float) -> events.Reacted:
        """As `POST /u/<token>` of the feedback web service: the token names the row's idempotency key, the row's
        recipient goes."""
        token = (reaction.delivery.unsubscribe_url or "").rsplit("/u/", 1)[-1]
        key = verify_token(self.unsubscribe_key, token)
        row = None if key is None else self.feedback.row_of_idempotency_key(key)
        if row is None:
            return _taken(reaction, now, None, None, "unmatched")
        applied = self.feedback.apply(row, Event.UNSUBSCRIBED, source="one-click", ref="one-click",
                                      detail="List-Unsubscribe one-click")
        return _taken(reaction, now, row, Event.UNSUBSCRIBED, applied.value)


def _taken(reaction: Reaction, now: float, row: int | None, event: Event | None, applied: str) -> events.Reacted:
    delivery = reaction.delivery
    return events.Reacted(now, reaction.kind.value, delivery.rcpt, delivery.message_id, row,
                          None if event is None else event.value, applied)


def reply_message(delivery: Delivery, now: float, number: int) -> bytes:
    """The person's answer to `delivery`, in its thread (the `number`-th reply of the run names its Message-ID)."""
    message = EmailMessage()
    message["From"] = delivery.rcpt
    message["To"] = delivery.login
    subject = delivery.subject
    message["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    message["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    message["Message-ID"] = f"<reply-{number}@{delivery.rcpt.rsplit('@', 1)[-1]}>"
    message["In-Reply-To"] = delivery.message_id
    message["References"] = " ".join((*delivery.references, delivery.message_id))
    message.set_content("Thanks for writing. Yes, let us talk next week.\n")
    return message.as_bytes()


def bounce_report(delivery: Delivery, now: float) -> bytes:
    """The recipient's server's RFC 3464 delivery status notification: the address does not exist (5.1.1)."""
    return DSN.format(mta=REPORTING_MTA, login=delivery.login, rcpt=delivery.rcpt, mid=delivery.message_id,
                      own=delivery.message_id.strip("<>").replace("@", "."), subject=delivery.subject,
                      date=format_datetime(datetime.fromtimestamp(now, UTC))).replace("\n", "\r\n").encode()


DSN = """\
From: MAILER-DAEMON@{mta}
To: {login}
Subject: Undelivered Mail Returned to Sender
Date: {date}
Message-ID: <dsn-{own}@{mta}>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="sim-dsn"

--sim-dsn
Content-Type: text/plain; charset=us-ascii

Your message to {rcpt} could not be delivered: no such user.

--sim-dsn
Content-Type: message/delivery-status

Reporting-MTA: dns; {mta}

Final-Recipient: rfc822; {rcpt}
Action: failed
Status: 5.1.1
Diagnostic-Code: smtp; 550 5.1.1 <{rcpt}>: Recipient address rejected: User unknown

--sim-dsn
Content-Type: text/rfc822-headers

From: {login}
To: {rcpt}
Message-ID: {mid}
Subject: {subject}

--sim-dsn--
"""
