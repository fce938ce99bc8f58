"""The recipients: some addresses do not exist (their first step bounces), some people reply, some unsubscribe,
some are away (an out-of-office naming the day they are back) and some ask in a reply to be removed.

Each reaction reaches the ledger the way it does in production. A bounce report and a reply land in the sending
mailbox's inbox as raw messages, classified by the inbox reader's own parser (`sender.feedback.bounces.parse`) and
matched to the row they are about by the Message-IDs they carry, as `sender inbox` does; an unsubscribe is a click
on the message's one-click link, its token checked with the ledger's key (`verify_token`, as the feedback web
service checks it) and its row unsubscribed as `POST /u/<token>` does. Only the transports (IMAP, HTTP) are left
out. The ledger then ends the lead's sequence: its later steps are never created, or are cancelled; an out-of-office
ends nothing and holds the lead's next step until the day after its author is back (the inbox's own reading,
`sender.feedback.inbox.read_reply`), and a "please remove me" is an unsubscribe.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime
from enum import StrEnum

from sender.feedback.bounces import MessageKind, parse
from sender.feedback.inbox import event_of, hold_why, read_reply
from sender.feedback.reply_kinds import ReplyKind
from sender.ledger.events import Applied, Event, Feedback
from sender.sending.tokens import verify_token
from simulation import events
from simulation.mail import Delivery
from simulation.model import Reactions

REPORTING_MTA = "mx.leads.example"


class Kind(StrEnum):
    BOUNCE = "bounce"
    REPLY = "reply"
    UNSUBSCRIBE = "unsubscribe"
    AWAY = "away"  # an out-of-office naming its author's return day
    STOP = "stop"  # a reply asking to be removed


@dataclass(frozen=True)
class Reaction:
    """What one recipient does about one message, and when."""

    at: float
    kind: Kind
    delivery: Delivery
    away_days: int = 0  # an out-of-office's: its author is back this many days after the message


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
        unsubscribe = reply + rates.at_step(rates.unsubscribe, nth)
        if draw < unsubscribe:
            return Reaction(now + self.rng.expovariate(1 / rates.unsubscribe_mean_s), Kind.UNSUBSCRIBE, delivery)
        away = unsubscribe + rates.at_step(rates.away, nth)
        if draw < away:
            return Reaction(now + self.rng.uniform(*rates.away_after_s), Kind.AWAY, delivery,
                            self.rng.randint(*rates.away_days))
        if draw < away + rates.at_step(rates.stop, nth):
            return Reaction(now + self.rng.expovariate(1 / rates.reply_mean_s), Kind.STOP, delivery)
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
            raw = reply_message(delivery, now, self._replies, reaction.kind, reaction.away_days)
        parsed = parse(raw)
        row = next((found for found in (self.feedback.row_of(mid) for mid in parsed.about) if found is not None),
                   None)
        if row is None or parsed.kind is MessageKind.MALFORMED or (
                parsed.recipients and self.feedback.address_of(row) not in parsed.recipients):
            return _taken(reaction, now, row, None, "unmatched")  # nothing changes on a guess, as in the reader
        # read as the inbox reads it: an out-of-office holds the lead, a "please remove me" is an unsubscribe
        read = read_reply(raw, parsed, datetime.fromtimestamp(now, UTC).date())
        event, detail = event_of(parsed, read)
        applied = self.feedback.apply(row, event, source="inbox", ref=parsed.own_message_id or f"sim:{now}",
                                      detail=detail)
        held_until: str | None = None
        if read is not None and read.kind is ReplyKind.AUTOMATIC and read.hold_until is not None and \
                applied is not Applied.FORGED:
            self.feedback.hold(row, read.hold_until, hold_why(read))
            held_until = read.hold_until.isoformat()
        return _taken(reaction, now, row, event, applied.value, held_until)

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


def _taken(reaction: Reaction, now: float, row: int | None, event: Event | None, applied: str,
           held_until: str | None = None) -> events.Reacted:
    delivery = reaction.delivery
    return events.Reacted(now, reaction.kind.value, delivery.rcpt, delivery.message_id, row,
                          None if event is None else event.value, applied, held_until)


def reply_message(delivery: Delivery, now: float, number: int, kind: Kind = Kind.REPLY, away_days: int = 0) -> bytes:
    """The person's answer to `delivery`, in its thread (the `number`-th reply of the run names its Message-ID): a
    reply, a request to be removed, or (AWAY) an out-of-office naming the day its author is back, `away_days`
    after `now`."""
    message = EmailMessage()
    message["From"] = delivery.rcpt
    message["To"] = delivery.login
    subject = delivery.subject
    message["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    message["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    message["Message-ID"] = f"<reply-{number}@{delivery.rcpt.rsplit('@', 1)[-1]}>"
    message["In-Reply-To"] = delivery.message_id
    message["References"] = " ".join((*delivery.references, delivery.message_id))
    if kind is Kind.AWAY:
        back = datetime.fromtimestamp(now, UTC).date() + timedelta(days=away_days)
        del message["Subject"]
        message["Subject"] = f"Automatic reply: {subject}"
        message["Auto-Submitted"] = "auto-replied"
        message.set_content(f"I am out of the office and back on {_long_date(back)}. I will answer then.\n")
    elif kind is Kind.STOP:
        message.set_content("Please remove me from your list.\n")
    else:
        message.set_content("Thanks for writing. Yes, let us talk next week.\n")
    return message.as_bytes()


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def _long_date(day: date) -> str:
    """`12 January 2027`, as an English out-of-office writes it (whatever the machine's locale)."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


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
