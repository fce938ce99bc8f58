"""Messages as they land in a sending mailbox's inbox, modelled on what real servers send: RFC 3464 DSNs from
Postfix, Gmail and Microsoft 365, Exim's and qmail's plain-text bounces, an ARF spam complaint, replies,
out-of-office replies, an unsubscribe mail, unrelated mail and malformed reports. Each takes the Message-ID of the
message it is about and the lead's address."""

from __future__ import annotations

from collections.abc import Callable

BOX = "box0@sender.example"
Sample = Callable[[str, str], bytes]  # (the Message-ID it is about, the lead's address) -> the raw message


def _headers(subject: str, sender: str, own_id: str, extra: str = "") -> str:
    return (f"From: {sender}\r\nTo: {BOX}\r\nSubject: {subject}\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000\r\n"
            f"Message-ID: {own_id}\r\nMIME-Version: 1.0\r\n{extra}")


def _original(message_id: str, to: str) -> str:
    return (f"From: {BOX}\r\nTo: {to}\r\nSubject: Hello\r\nMessage-ID: {message_id}\r\n"
            "Date: Mon, 30 Nov 2026 09:00:00 +0000\r\n")


def _dsn(*, sender: str, subject: str, own_id: str, to: str, action: str, status: str, diagnostic: str,
         returned: str, human: str, reporting: str = "dns; mx.rcpt.example") -> bytes:
    boundary = "DSN-boundary-1"
    return (_headers(subject, sender, own_id, "Auto-Submitted: auto-replied\r\n") +
            f'Content-Type: multipart/report; report-type=delivery-status; boundary="{boundary}"\r\n\r\n'
            f"--{boundary}\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n{human}\r\n\r\n"
            f"--{boundary}\r\nContent-Type: message/delivery-status\r\n\r\n"
            f"Reporting-MTA: {reporting}\r\nArrival-Date: Mon, 30 Nov 2026 09:00:01 +0000\r\n\r\n"
            f"Final-Recipient: rfc822; {to}\r\nOriginal-Recipient: rfc822;{to}\r\nAction: {action}\r\n"
            f"Status: {status}\r\nDiagnostic-Code: {diagnostic}\r\n\r\n"
            f"--{boundary}\r\n{returned}--{boundary}--\r\n").encode()


def postfix_hard(message_id: str, to: str) -> bytes:
    return _dsn(sender="MAILER-DAEMON@mx.sender.example (Mail Delivery System)",
                subject="Undelivered Mail Returned to Sender", own_id="<20261130-postfix@mx.sender.example>", to=to,
                action="failed", status="5.1.1",
                diagnostic=f"smtp; 550 5.1.1 <{to}>: Recipient address rejected: User unknown in virtual mailbox "
                           "table",
                returned=f"Content-Type: text/rfc822-headers\r\n\r\n{_original(message_id, to)}\r\n",
                human="This is the mail system at host mx.sender.example.\r\n\r\nI'm sorry to have to inform you "
                      "that your message could not\r\nbe delivered to one or more recipients.")


def gmail_hard(message_id: str, to: str) -> bytes:
    return _dsn(sender="Mail Delivery Subsystem <mailer-daemon@googlemail.com>",
                subject="Delivery Status Notification (Failure)", own_id="<gmail-dsn-1@mx.google.com>", to=to,
                action="failed", status="5.1.1",
                diagnostic="smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try "
                           "550-5.1.1 double-checking the recipient's email address for typos or 550 5.1.1 "
                           "unnecessary spaces. https://support.google.com/mail/?p=NoSuchUser",
                returned=f"Content-Type: message/rfc822\r\n\r\n{_original(message_id, to)}\r\nHi lead\r\n\r\n",
                human=f"Address not found\r\n\r\nYour message wasn't delivered to {to} because the address couldn't "
                      "be found, or is unable to receive mail.", reporting="dns; googlemail.com")


def microsoft_hard(message_id: str, to: str) -> bytes:
    return _dsn(sender="Microsoft Outlook <postmaster@outlook.com>", subject="Undeliverable: Hello",
                own_id="<ndr-1@EUR01.prod.outlook.com>", to=to, action="failed", status="5.1.10",
                diagnostic="smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address "
                           "lookup",
                returned=f"Content-Type: text/rfc822-headers\r\n\r\n{_original(message_id, to)}\r\n",
                human="Your message to the recipient couldn't be delivered.", reporting="dns;EUR01.prod.outlook.com")


def delayed_soft(message_id: str, to: str) -> bytes:
    return _dsn(sender="MAILER-DAEMON@mx.sender.example (Mail Delivery System)",
                subject="Delayed Mail (still being retried)", own_id="<20261130-delay@mx.sender.example>", to=to,
                action="delayed", status="4.4.1", diagnostic="X-Postfix; connect to mx.rcpt.example: Connection "
                                                             "timed out",
                returned=f"Content-Type: text/rfc822-headers\r\n\r\n{_original(message_id, to)}\r\n",
                human="This is the mail system. Your message could not be delivered for 4 hours; it will be retried.")


def policy_block(message_id: str, to: str) -> bytes:
    """A permanent refusal for content: the address is fine, so it must not be suppressed."""
    return _dsn(sender="Mail Delivery Subsystem <mailer-daemon@googlemail.com>",
                subject="Delivery Status Notification (Failure)", own_id="<gmail-dsn-2@mx.google.com>", to=to,
                action="failed", status="5.7.1",
                diagnostic="smtp; 550-5.7.1 This message was blocked because its content presents a potential "
                           "550 5.7.1 security issue.",
                returned=f"Content-Type: text/rfc822-headers\r\n\r\n{_original(message_id, to)}\r\n",
                human="Message blocked", reporting="dns; googlemail.com")


def docomo_filter(message_id: str, to: str) -> bytes:
    """NTT docomo's reception filter as a Postfix relay reports it (sisimai's rhost-nttdocomo-02): "550 Unknown user"
    in reply to the end of DATA, for an address that exists; our sender was refused, so it must not be suppressed."""
    return _dsn(sender="MAILER-DAEMON@mx.sender.example (Mail Delivery System)",
                subject="Undelivered Mail Returned to Sender", own_id="<20261130-docomo@mx.sender.example>", to=to,
                action="failed", status="5.0.0", diagnostic=f"smtp; 550 Unknown user {to}",
                returned=f"Content-Type: text/rfc822-headers\r\n\r\n{_original(message_id, to)}\r\n",
                human=f"This is the mail system at host mx.sender.example.\r\n\r\n<{to}>: host "
                      f"mfsmax.docomo.ne.jp[203.138.181.240] said:\r\n    550 Unknown user {to} (in reply to end "
                      "of DATA\r\n    command)", reporting="dns; mx.sender.example")


def exim_hard(message_id: str, to: str) -> bytes:
    return (_headers("Mail delivery failed: returning message to sender",
                     "Mail Delivery System <Mailer-Daemon@mx.exim.example>", "<E1exim-0001@mx.exim.example>",
                     f"X-Failed-Recipients: {to}\r\nAuto-Submitted: auto-replied\r\n") +
            "Content-Type: text/plain; charset=us-ascii\r\n\r\n"
            "This message was created automatically by mail delivery software.\r\n\r\n"
            "A message that you sent could not be delivered to one or more of its\r\nrecipients. This is a "
            f"permanent error. The following address(es) failed:\r\n\r\n  {to}\r\n"
            f"    SMTP error from remote mail server after RCPT TO:<{to}>:\r\n    550 5.1.1 User unknown\r\n\r\n"
            "------ This is a copy of the message, including all the headers. ------\r\n\r\n"
            f"{_original(message_id, to)}\r\nHi lead\r\n").encode()


def qmail_hard(message_id: str, to: str) -> bytes:
    return (_headers("failure notice", "MAILER-DAEMON@qmail.example", "<qmail-0001@qmail.example>") +
            "Content-Type: text/plain\r\n\r\n"
            "Hi. This is the qmail-send program at qmail.example.\r\n"
            "I'm afraid I wasn't able to deliver your message to the following addresses.\r\n"
            "This is a permanent error; I've given up. Sorry it didn't work out.\r\n\r\n"
            f"<{to}>:\r\nSorry, no mailbox here by that name. (#5.1.1)\r\n\r\n"
            "--- Below this line is a copy of the message.\r\n\r\n"
            f"{_original(message_id, to)}\r\nHi lead\r\n").encode()


def arf_complaint(message_id: str, to: str) -> bytes:
    boundary = "ARF-1"
    return (_headers("complaint about message from 192.0.2.1", "Yahoo! Mail AntiSpam Feedback <feedback@arf.yahoo.com>",
                     "<arf-1@arf.yahoo.com>") +
            f'Content-Type: multipart/report; report-type=feedback-report; boundary="{boundary}"\r\n\r\n'
            f"--{boundary}\r\nContent-Type: text/plain\r\n\r\nThis is an email abuse report.\r\n\r\n"
            f"--{boundary}\r\nContent-Type: message/feedback-report\r\n\r\n"
            "Feedback-Type: abuse\r\nUser-Agent: Yahoo!-Mail-Feedback/2.0\r\nVersion: 1\r\n"
            "Source-IP: 192.0.2.1\r\n\r\n"
            f"--{boundary}\r\nContent-Type: message/rfc822\r\n\r\n{_original(message_id, to)}\r\nHi lead\r\n\r\n"
            f"--{boundary}--\r\n").encode()


def reply(message_id: str, to: str) -> bytes:
    return (_headers("Re: Hello", f"Lead <{to}>", "<reply-1@rcpt.example>",
                     f"In-Reply-To: {message_id}\r\nReferences: {message_id}\r\n") +
            "Content-Type: text/plain\r\n\r\nSounds interesting, call me tomorrow.\r\n").encode()


def reply_without_threading(message_id: str, to: str) -> bytes:
    """A reply from a client that drops In-Reply-To: matched by its author, the lead."""
    return (_headers("Your email", f"Lead <{to}>", "<reply-2@rcpt.example>") +
            "Content-Type: text/plain\r\n\r\nWho are you?\r\n").encode()


def out_of_office(message_id: str, to: str) -> bytes:
    return (_headers("Automatic reply: Hello", f"Lead <{to}>", "<ooo-1@rcpt.example>",
                     f"Auto-Submitted: auto-replied\r\nX-Auto-Response-Suppress: All\r\nIn-Reply-To: {message_id}\r\n")
            + "Content-Type: text/plain\r\n\r\nI am out of the office until Monday.\r\n").encode()


def unsubscribe_mail(message_id: str, to: str) -> bytes:
    """What a client sends for the mailto: of List-Unsubscribe."""
    return (_headers("unsubscribe", to, "<unsub-1@rcpt.example>") +
            "Content-Type: text/plain\r\n\r\n\r\n").encode()


def stop_reply(message_id: str, to: str) -> bytes:
    """A person's reply asking us to stop, in German: an unsubscribe."""
    return (_headers("Re: Hello", f"Lead <{to}>", "<stop-1@rcpt.example>",
                     f"In-Reply-To: {message_id}\r\nReferences: {message_id}\r\n") +
            "Content-Type: text/plain; charset=utf-8\r\n\r\nBitte austragen.\r\n").encode()


def reply_quoting_our_footer(message_id: str, to: str) -> bytes:
    """A reply that quotes our mail, unsubscribe footer included: only its own words count, so it is a reply."""
    return (_headers("Re: Hello", f"Lead <{to}>", "<quoting-1@rcpt.example>",
                     f"In-Reply-To: {message_id}\r\nReferences: {message_id}\r\n") +
            "Content-Type: text/plain\r\n\r\nYes, send me the prices.\r\n\r\n"
            f"On Mon, 30 Nov 2026 at 09:00, Box <{BOX}> wrote:\r\n> Hello\r\n"
            "> Reply unsubscribe to stop these emails.\r\n").encode()


def unrelated(message_id: str, to: str) -> bytes:
    return (_headers("Your invoice", "billing@vendor.example", "<invoice-1@vendor.example>") +
            "Content-Type: text/plain\r\n\r\nYour invoice is attached.\r\n").encode()


def bounce_of_a_stranger(message_id: str, to: str) -> bytes:
    """A real bounce about a message that is not ours (no row has its Message-ID)."""
    return postfix_hard("<not-ours-1@elsewhere.example>", "someone@elsewhere.example")


def malformed_report(message_id: str, to: str) -> bytes:
    boundary = "broken"
    return (_headers("Undelivered Mail", "MAILER-DAEMON@mx.sender.example", "<broken-1@mx.sender.example>") +
            f'Content-Type: multipart/report; report-type=delivery-status; boundary="{boundary}"\r\n\r\n'
            f"--{boundary}\r\nContent-Type: message/delivery-status\r\n\r\nthis is not a status\r\n"
            f"--{boundary}--\r\n").encode()


def no_message_id_bounce(message_id: str, to: str) -> bytes:
    """A DSN that returns nothing of the original: nothing to match it to."""
    return _dsn(sender="MAILER-DAEMON@mx.sender.example", subject="Undelivered Mail Returned to Sender",
                own_id="<20261130-bare@mx.sender.example>", to=to, action="failed", status="5.1.1",
                diagnostic="smtp; 550 5.1.1 User unknown", returned="Content-Type: text/plain\r\n\r\n(no copy)\r\n",
                human="The message could not be delivered.")


# -- Hostile messages: what a stranger can put in a sending mailbox. None may stop a pass or change anything. --

def charset_dsn(charset: str) -> Sample:
    """A real-looking DSN whose human part declares a charset Python has no text codec for (x-no-such-charset,
    or a bytes-to-bytes codec such as zlib_codec): once a LookupError that stopped every pass."""
    def sample(message_id: str, to: str) -> bytes:
        return postfix_hard(message_id, to).replace(b"charset=us-ascii", b"charset=" + charset.encode())
    return sample


def many_ids_dsn(message_id: str, to: str, count: int = 40_000) -> bytes:
    """A DSN quoting `count` Message-IDs (one of ours last): once 13-25 s of quadratic dedup and a query per ID."""
    quoted = "".join(f"Message-ID: <junk{n}@elsewhere.example>\r\n" for n in range(count))
    return _dsn(sender="MAILER-DAEMON@mx.sender.example", subject="Undelivered Mail Returned to Sender",
                own_id="<many-ids@mx.sender.example>", to="someone@elsewhere.example", action="failed",
                status="5.1.1", diagnostic="smtp; 550 5.1.1 User unknown",
                returned=f"Content-Type: text/plain\r\n\r\n{quoted}Message-ID: {message_id}\r\n",
                human="The message could not be delivered.")


def huge_dsn(message_id: str, to: str, size: int = 1_300_000) -> bytes:
    """A 1.3 MB DSN whose human part is junk lines (once 21.7 s for one pass): about a stranger's message."""
    junk = "delivery to someone@elsewhere.example failed: 550 user unknown\r\n" * (size // 64)
    return _dsn(sender="MAILER-DAEMON@mx.sender.example", subject="Undelivered Mail Returned to Sender",
                own_id="<huge@mx.sender.example>", to="someone@elsewhere.example", action="failed", status="5.1.1",
                diagnostic="smtp; 550 5.1.1 User unknown",
                returned=f"Content-Type: text/rfc822-headers\r\n\r\n{_original(message_id, to)}\r\n", human=junk)


def many_parts(message_id: str, to: str, parts: int = 5_000) -> bytes:
    boundary = "P"
    body = "".join(f"--{boundary}\r\nContent-Type: text/plain\r\n\r\npart {n}\r\n" for n in range(parts))
    return (_headers("Re: Hello", f"Lead <{to}>", "<parts@rcpt.example>", f"In-Reply-To: {message_id}\r\n") +
            f'Content-Type: multipart/mixed; boundary="{boundary}"\r\n\r\n{body}--{boundary}--\r\n').encode()


def deep_nesting(message_id: str, to: str, depth: int = 2_000) -> bytes:
    """Message parts nested 2,000 deep: the email package's parser and walk() recurse."""
    opening = "".join(f'Content-Type: multipart/mixed; boundary="b{n}"\r\n\r\n--b{n}\r\n' for n in range(depth))
    closing = "".join(f"\r\n--b{n}--" for n in reversed(range(depth)))
    return (_headers("Re: Hello", f"Lead <{to}>", "<deep@rcpt.example>", f"In-Reply-To: {message_id}\r\n") +
            opening + "Content-Type: text/plain\r\n\r\nhi" + closing + "\r\n").encode()


def rfc2231_report(message_id: str, to: str) -> bytes:
    """A report whose report-type is an RFC 2231 parameter: the email package returns a tuple for it."""
    return postfix_hard(message_id, "someone@elsewhere.example").replace(
        b"report-type=delivery-status;", b"report-type*=us-ascii''delivery-status;")


def broken_mime(message_id: str, to: str) -> bytes:
    """A multipart report with no boundary, a base64 part that is not base64, and bytes that are not UTF-8."""
    return (_headers("Undelivered Mail", "MAILER-DAEMON@mx.sender.example \xff\xfe", "<broken-2@mx.sender.example>")
            .encode("latin-1") + b"Content-Type: multipart/report; report-type=delivery-status\r\n"
            b"Content-Transfer-Encoding: base64\r\n\r\n\x00\x01\xff not base64 \xc3\x28 <a\x00b@x.example>\r\n")


def nul_ids(message_id: str, to: str) -> bytes:
    """Control characters and 8-bit bytes in the headers the ledger is asked about."""
    return (f"From: =?x-no-such-charset?q?=FF?= <str\x00anger@rcpt.example>\r\nTo: {BOX}\r\nSubject: Re: \x1b[31mHi\r\n"
            f"Message-ID: <nul\x00id@rcpt.example>\r\nIn-Reply-To: <bad\x00{message_id[1:]}\r\n"
            "Content-Type: text/plain; charset=zlib_codec\r\n\r\n\xff\xfe hello\r\n").encode("latin-1")


def no_recipient_bounce(message_id: str, to: str) -> bytes:
    """A DSN about one of our messages that names no recipient: it must not bounce the row."""
    return (_headers("Undelivered Mail Returned to Sender", "MAILER-DAEMON@mx.sender.example",
                     "<no-rcpt@mx.sender.example>") +
            'Content-Type: multipart/report; report-type=delivery-status; boundary="B"\r\n\r\n'
            "--B\r\nContent-Type: text/plain\r\n\r\nDelivery failed.\r\n\r\n"
            "--B\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.rcpt.example\r\n\r\n"
            "Action: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550 5.1.1 User unknown\r\n\r\n"
            f"--B\r\nContent-Type: text/rfc822-headers\r\n\r\n{_original(message_id, to)}\r\n--B--\r\n").encode()


def other_recipient_bounce(message_id: str, to: str) -> bytes:
    """A DSN about one of our messages naming another address than the row's."""
    return postfix_hard(message_id, to).replace(f"rfc822; {to}".encode(), b"rfc822; other@rcpt.example").replace(
        f"rfc822;{to}".encode(), b"rfc822;other@rcpt.example").replace(f"<{to}>:".encode(), b"<other@rcpt.example>:")


def without_message_id(sample: Sample) -> Sample:
    """`sample` with its own Message-ID header removed: its replay key is then a hash of the message."""
    def stripped(message_id: str, to: str) -> bytes:
        lines = sample(message_id, to).split(b"\r\n")
        drop = next(n for n, line in enumerate(lines) if line.lower().startswith(b"message-id:"))
        return b"\r\n".join(lines[:drop] + lines[drop + 1:])
    return stripped


def authenticated(sample: Sample, *results: str) -> Sample:
    """`sample` with Authentication-Results headers on top, as the receiving provider adds them (topmost first)."""
    def signed(message_id: str, to: str) -> bytes:
        return "".join(f"Authentication-Results: {r}\r\n" for r in results).encode() + sample(message_id, to)
    return signed


def arf_complaint_numbered(n: int) -> Sample:
    """An ARF report of its own (its own Message-ID) about our message: one recipient can send many."""
    def sample(message_id: str, to: str) -> bytes:
        return arf_complaint(message_id, to).replace(b"<arf-1@arf.yahoo.com>", f"<arf-{n}@arf.example>".encode())
    return sample


def postfix_hard_numbered(n: int) -> Sample:
    def sample(message_id: str, to: str) -> bytes:
        return postfix_hard(message_id, to).replace(b"<20261130-postfix@mx.sender.example>",
                                                    f"<dsn-{n}@mx.sender.example>".encode())
    return sample


def arf_not_ours(message_id: str, to: str) -> bytes:
    """An ARF report from the lead's own address that quotes none of our Message-IDs: a complaint must name one."""
    return (arf_complaint("<not-ours-2@elsewhere.example>", to)
            .replace(b"Yahoo! Mail AntiSpam Feedback <feedback@arf.yahoo.com>", to.encode())
            .replace(b"<arf-1@arf.yahoo.com>", b"<arf-not-ours@rcpt.example>"))
